/**
 * The demo handler: failures are a pure function of the item id (so reruns fail the same items
 * and about `failure_rate` of them), bad parameters fail every item naming the parameter,
 * latency is waited once per batch and gives way to an abort, and the all-zero path uses no
 * timers at all.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createLogger } from '../logger.ts';
import { createDemoHandler, demoFails } from './demo.ts';
import type { BatchContext, ItemOutcome } from './types.ts';

const logger = createLogger('silent');

function batchContext(queryParams: Record<string, unknown>, signal = new AbortController().signal): BatchContext {
  return {
    operationId: 'op-1',
    organizationId: 'org-1',
    operationType: 'demo',
    queryParams,
    signal,
    logger,
    idempotencyKey: (itemId) => `op-1:${itemId}`,
    attempt: 1,
  };
}

function ids(count: number, prefix = 'item-'): string[] {
  return Array.from({ length: count }, (_, i) => `${prefix}${i}`);
}

function failedIds(outcomes: readonly ItemOutcome[]): string[] {
  return outcomes.filter((outcome) => outcome.status === 'failed').map((outcome) => outcome.id);
}

afterEach(() => {
  vi.useRealTimers();
});

describe('demoFails', () => {
  it('gives the same answer for the same id every time', () => {
    const sample = ids(1000);
    const first = sample.map((id) => demoFails(id, 0.3));
    const second = sample.map((id) => demoFails(id, 0.3));
    expect(second).toEqual(first);
    expect(first.some(Boolean)).toBe(true);
    expect(first.every(Boolean)).toBe(false);
  });

  it.each([0.05, 0.25, 0.5, 0.9])('fails about %s of 10,000 ids', (rate) => {
    const failures = ids(10_000).filter((id) => demoFails(id, rate)).length;
    expect(Math.abs(failures / 10_000 - rate)).toBeLessThan(0.03);
  });

  it('never fails at rate 0 and always fails at rate 1', () => {
    const sample = ids(2000);
    expect(sample.filter((id) => demoFails(id, 0))).toEqual([]);
    expect(sample.filter((id) => demoFails(id, 1))).toEqual(sample);
  });

  it('fails a subset of the higher rate’s failures at a lower rate', () => {
    const sample = ids(2000);
    const atHigh = new Set(sample.filter((id) => demoFails(id, 0.6)));
    const atLow = sample.filter((id) => demoFails(id, 0.2));
    expect(atLow.length).toBeGreaterThan(0);
    expect(atLow.every((id) => atHigh.has(id))).toBe(true);
  });
});

describe('createDemoHandler', () => {
  const handler = createDemoHandler();

  it('serves the demo operation type', () => {
    expect(handler.type).toBe('demo');
  });

  it('completes every item, in order, at the defaults', async () => {
    const outcomes = await handler.handleBatch(['a', 'b', 'c'], batchContext({}));
    expect(outcomes).toEqual([
      { id: 'a', status: 'completed' },
      { id: 'b', status: 'completed' },
      { id: 'c', status: 'completed' },
    ]);
  });

  it('returns at once without timers when latency_ms and failure_rate are 0', async () => {
    vi.useFakeTimers();
    const outcomes = await handler.handleBatch(ids(500), batchContext({ latency_ms: 0, failure_rate: 0 }));
    expect(outcomes).toHaveLength(500);
    expect(outcomes.every((outcome) => outcome.status === 'completed')).toBe(true);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('fails the same items on two runs, with the rate in the reason', async () => {
    const batch = ids(400);
    const first = await handler.handleBatch(batch, batchContext({ failure_rate: 0.25 }));
    const second = await handler.handleBatch(batch, batchContext({ failure_rate: 0.25 }));
    expect(first).toHaveLength(400);
    expect(failedIds(first).length).toBeGreaterThan(0);
    expect(failedIds(second)).toEqual(failedIds(first));
    expect(failedIds(first)).toEqual(batch.filter((id) => demoFails(id, 0.25)));
    const failed = first.find((outcome) => outcome.status === 'failed');
    expect(failed).toMatchObject({ reason: 'demo failure (failure_rate 0.25)' });
  });

  it('fails every item at failure_rate 1 and none at 0', async () => {
    const batch = ids(50);
    expect(failedIds(await handler.handleBatch(batch, batchContext({ failure_rate: 1 })))).toEqual(batch);
    expect(failedIds(await handler.handleBatch(batch, batchContext({ failure_rate: 0 })))).toEqual([]);
  });

  it.each([
    ['latency_ms', { latency_ms: -1 }],
    ['latency_ms', { latency_ms: 60_001 }],
    ['latency_ms', { latency_ms: '100' }],
    ['latency_ms', { latency_ms: null }],
    ['failure_rate', { failure_rate: 1.5 }],
    ['failure_rate', { failure_rate: -0.1 }],
    ['failure_rate', { failure_rate: 'half' }],
  ])('fails every item naming %s when given %j', async (name, queryParams) => {
    vi.useFakeTimers();
    const outcomes = await handler.handleBatch(['a', 'b'], batchContext(queryParams));
    expect(outcomes.map((outcome) => outcome.id)).toEqual(['a', 'b']);
    for (const outcome of outcomes) {
      expect(outcome.status).toBe('failed');
      expect(outcome).toMatchObject({ reason: expect.stringContaining(`query_params.${name}`) });
    }
    // A bad parameter is reported at once, not after some latency.
    expect(vi.getTimerCount()).toBe(0);
  });

  it('names both parameters when both are invalid', async () => {
    const [outcome] = await handler.handleBatch(['a'], batchContext({ latency_ms: -5, failure_rate: 2 }));
    expect(outcome).toMatchObject({ status: 'failed' });
    expect(outcome).toMatchObject({ reason: expect.stringContaining('query_params.latency_ms') });
    expect(outcome).toMatchObject({ reason: expect.stringContaining('query_params.failure_rate') });
  });

  it('waits latency_ms once for the whole batch', async () => {
    vi.useFakeTimers();
    let settled = false;
    const pending = handler.handleBatch(ids(100), batchContext({ latency_ms: 1000 })).then((outcomes) => {
      settled = true;
      return outcomes;
    });
    expect(vi.getTimerCount()).toBe(1);
    await vi.advanceTimersByTimeAsync(999);
    expect(settled).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    const outcomes = await pending;
    expect(settled).toBe(true);
    expect(outcomes).toHaveLength(100);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('rejects with the signal’s reason when aborted during the latency, and clears its timer', async () => {
    vi.useFakeTimers();
    const controller = new AbortController();
    const pending = handler.handleBatch(['a'], batchContext({ latency_ms: 60_000 }, controller.signal));
    expect(vi.getTimerCount()).toBe(1);
    const reason = new Error('operation paused');
    controller.abort(reason);
    await expect(pending).rejects.toBe(reason);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('rejects at once when the signal is already aborted and there is latency to wait', async () => {
    vi.useFakeTimers();
    const controller = new AbortController();
    const reason = new Error('worker shutting down');
    controller.abort(reason);
    await expect(handler.handleBatch(['a'], batchContext({ latency_ms: 10 }, controller.signal))).rejects.toBe(reason);
    expect(vi.getTimerCount()).toBe(0);
  });
});
