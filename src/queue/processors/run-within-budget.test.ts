/**
 * A handler inside its batch budget: one that honours the signal returns with what it did not
 * finish; one that ignores it is left behind after the grace period, keeping the items finished
 * before, and its late result or rejection changes nothing.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { ItemHandler } from '../../handlers/types.ts';
import { createLogger } from '../../logger.ts';
import { StopRequested } from '../stop-signals.ts';
import { runWithinBudget } from './run-within-budget.ts';

const ctx = {
  operationId: '00000000-0000-4000-8000-000000000001',
  organizationId: '00000000-0000-4000-8000-000000000002',
  operationType: 'test',
  queryParams: {},
  logger: createLogger('silent'),
};

/** A promise the test settles by hand. */
function gate() {
  let resolve: () => void = () => {};
  let reject: (error: Error) => void = () => {};
  const promise = new Promise<void>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

describe('runWithinBudget', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('a handler that honours the signal returns at the deadline with the rest given back', async () => {
    const deadlines: (number | undefined)[] = [];
    const handler: ItemHandler = {
      type: 'test',
      handle: (id, itemCtx) => {
        deadlines.push(itemCtx.deadline);
        return id === 'a'
          ? Promise.resolve()
          : new Promise((_, reject) => itemCtx.signal.addEventListener('abort', () => reject(itemCtx.signal.reason)));
      },
    };
    const started = Date.now();
    const running = runWithinBudget(handler, ['a', 'b', 'c'], ctx, { budgetMs: 1000, graceMs: 500, stops: [] });
    await vi.advanceTimersByTimeAsync(1000);
    expect(await running).toEqual({
      completed: ['a'],
      failed: [],
      unhandled: ['b', 'c'],
      stoppedBy: 'timeout',
      abandoned: false,
      exhausted: ['b'],
      lastError: undefined,
    });
    expect(deadlines).toEqual([started + 1000, started + 1000]);
  });

  it('leaves a handler that ignores its signal behind after the grace, keeping what it finished', async () => {
    const stuck = gate();
    const settled = vi.fn();
    const handler: ItemHandler = {
      type: 'test',
      handle: (id) => (id === 'b' ? stuck.promise : Promise.resolve()),
    };
    const running = runWithinBudget(handler, ['a', 'b', 'c'], ctx, {
      budgetMs: 1000,
      graceMs: 500,
      stops: [],
      onAbandonedSettled: settled,
    });
    await vi.advanceTimersByTimeAsync(1499);
    let done = false;
    void running.then(() => {
      done = true;
    });
    await vi.advanceTimersByTimeAsync(0);
    expect(done).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    const outcome = await running;
    expect(outcome).toEqual({
      completed: ['a'],
      failed: [],
      unhandled: ['b', 'c'],
      stoppedBy: 'timeout',
      abandoned: true,
      exhausted: ['b'],
      lastError: undefined,
    });
    // Its late rejection is caught (an unhandled one would fail this run) and changes nothing.
    stuck.reject(new Error('too late'));
    await vi.advanceTimersByTimeAsync(0);
    expect(settled).toHaveBeenCalledTimes(1);
    expect(outcome.completed).toEqual(['a']);
  });

  it('leaves a handler behind the same way when the operation is cancelled', async () => {
    const stop = new AbortController();
    const handler: ItemHandler = { type: 'test', handle: () => new Promise(() => {}) };
    const running = runWithinBudget(handler, ['a'], ctx, { budgetMs: 60_000, graceMs: 300, stops: [stop.signal] });
    stop.abort(new StopRequested('cancelled'));
    await vi.advanceTimersByTimeAsync(300);
    expect(await running).toMatchObject({ abandoned: true, stoppedBy: 'cancelled', unhandled: ['a'], exhausted: [] });
  });
});
