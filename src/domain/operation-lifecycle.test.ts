import { describe, expect, it } from 'vitest';
import { OPERATION_STATUS } from './operation.ts';
import { LIFECYCLE_ACTIONS, transition } from './operation-lifecycle.ts';

describe('operation lifecycle', () => {
  it('answers every action in every status', () => {
    for (const action of LIFECYCLE_ACTIONS) {
      for (const status of OPERATION_STATUS) {
        expect(transition(action, status), `${action} in ${status}`).toBeDefined();
      }
    }
  });

  it('never changes a finished operation', () => {
    for (const action of LIFECYCLE_ACTIONS) {
      for (const status of ['completed', 'cancelled'] as const) {
        expect(transition(action, status).kind, `${action} in ${status}`).not.toBe('change');
      }
    }
  });

  it('pauses and resumes, each once', () => {
    expect(transition('pause', 'active')).toEqual({ kind: 'change', to: 'paused', event: 'paused' });
    expect(transition('pause', 'paused')).toEqual({ kind: 'already' });
    expect(transition('resume', 'paused')).toEqual({ kind: 'change', to: 'active', event: 'resumed' });
    expect(transition('resume', 'active')).toEqual({ kind: 'already' });
  });

  it('refuses to pause or resume what has finished, saying what cannot happen', () => {
    expect(transition('pause', 'completed')).toEqual({ kind: 'refused', verb: 'paused' });
    expect(transition('resume', 'cancelled')).toEqual({ kind: 'refused', verb: 'resumed' });
  });

  it('completes and cancels open operations; repeating either is answered as it is; crossing them is refused', () => {
    for (const status of ['active', 'paused'] as const) {
      expect(transition('complete', status)).toEqual({ kind: 'change', to: 'completed', event: 'completed' });
      expect(transition('cancel', status)).toEqual({ kind: 'change', to: 'cancelled', event: 'cancelled' });
    }
    expect(transition('complete', 'completed').kind).toBe('already');
    expect(transition('cancel', 'cancelled').kind).toBe('already');
    expect(transition('complete', 'cancelled')).toEqual({ kind: 'refused', verb: 'completed' });
    expect(transition('cancel', 'completed')).toEqual({ kind: 'refused', verb: 'cancelled' });
  });

  it('lets a pause that landed first win over a worker completing the operation', () => {
    expect(transition('complete_if_done', 'active').kind).toBe('change');
    expect(transition('complete_if_done', 'paused').kind).toBe('already');
  });

  it('records on active and paused operations, never on finished ones', () => {
    expect(transition('record', 'active').kind).toBe('allowed');
    expect(transition('record', 'paused').kind).toBe('allowed');
    expect(transition('record', 'completed').kind).toBe('refused');
    expect(transition('record', 'cancelled').kind).toBe('refused');
  });

  it('hands out new batches only while active, and renews a paused operation’s own batch', () => {
    expect(transition('lease', 'active').kind).toBe('allowed');
    expect(transition('lease', 'paused').kind).toBe('already');
    expect(transition('lease', 'completed').kind).toBe('refused');
  });

  it('trips the circuit breaker only on a running operation', () => {
    expect(transition('breaker_trip', 'active')).toEqual({ kind: 'change', to: 'paused', event: 'paused' });
    expect(transition('breaker_trip', 'paused').kind).toBe('already');
  });
});
