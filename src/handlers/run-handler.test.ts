/**
 * The handler contract as the workers apply it: permanent failures, retries with backoff,
 * Retry-After hints, batch outcomes, and items given back when the signal fires.
 */
import { describe, expect, it } from 'vitest';
import { createLogger } from '../logger.ts';
import { emptyProgress, runHandler } from './run-handler.ts';
import { type BatchHandler, type HandlerContext, ItemError, type ItemHandler, RetryableError } from './types.ts';

function context(signal = new AbortController().signal): HandlerContext {
  return {
    operationId: '00000000-0000-4000-8000-000000000001',
    organizationId: '00000000-0000-4000-8000-000000000002',
    operationType: 'test',
    queryParams: {},
    signal,
    logger: createLogger('silent'),
  };
}

describe('runHandler with a per-item handler', () => {
  it('completes, fails for good on ItemError, and retries other errors up to attempts', async () => {
    const calls = new Map<string, number>();
    const keys: string[] = [];
    const handler: ItemHandler = {
      type: 'test',
      attempts: 3,
      backoffMs: 0,
      async handle(id, ctx) {
        calls.set(id, (calls.get(id) ?? 0) + 1);
        keys.push(ctx.idempotencyKey);
        if (id === 'bad') {
          throw new ItemError('no phone number');
        }
        if (id === 'flaky' && ctx.attempt < 2) {
          throw new Error('socket hang up');
        }
        if (id === 'down') {
          throw new Error(`still down (attempt ${ctx.attempt})`);
        }
      },
    };
    const outcome = await runHandler(handler, ['ok', 'bad', 'flaky', 'down'], context());
    expect(outcome).toEqual({
      completed: ['ok', 'flaky'],
      failed: [
        { id: 'bad', reason: 'no phone number' },
        { id: 'down', reason: 'still down (attempt 3)' },
      ],
      unhandled: [],
    });
    expect(Object.fromEntries(calls)).toEqual({ ok: 1, bad: 1, flaky: 2, down: 3 });
    expect(keys[0]).toBe('00000000-0000-4000-8000-000000000001:ok');
  });

  it('waits the RetryableError delay instead of the backoff', async () => {
    const seen: number[] = [];
    const handler: ItemHandler = {
      type: 'test',
      attempts: 2,
      backoffMs: 60_000, // would time the test out if it were used
      async handle(_id, ctx) {
        seen.push(ctx.attempt);
        if (ctx.attempt === 1) {
          throw new RetryableError('HTTP 429', 1);
        }
      },
    };
    expect((await runHandler(handler, ['a'], context())).completed).toEqual(['a']);
    expect(seen).toEqual([1, 2]);
  });

  it('gives back the items it did not handle when the signal fires', async () => {
    const controller = new AbortController();
    const handler: ItemHandler = {
      type: 'test',
      async handle(id) {
        if (id === 'b') {
          controller.abort(new Error('paused'));
          throw new Error('aborted mid-item');
        }
      },
    };
    const outcome = await runHandler(handler, ['a', 'b', 'c', 'd'], context(controller.signal));
    expect(outcome).toEqual({ completed: ['a'], failed: [], unhandled: ['b', 'c', 'd'] });
  });

  it('gives an item back when the signal fires during the backoff', async () => {
    const controller = new AbortController();
    const handler: ItemHandler = {
      type: 'test',
      attempts: 5,
      backoffMs: 60_000,
      async handle() {
        queueMicrotask(() => controller.abort(new Error('cancelled')));
        throw new Error('transient');
      },
    };
    const outcome = await runHandler(handler, ['a'], context(controller.signal));
    expect(outcome).toEqual({ completed: [], failed: [], unhandled: ['a'] });
  });
});

describe('runHandler with a batch handler', () => {
  it('records outcomes, retries only the items left out, and ignores ids it was not given', async () => {
    const batches: string[][] = [];
    const handler: BatchHandler = {
      type: 'test',
      attempts: 3,
      backoffMs: 0,
      async handleBatch(ids, ctx) {
        batches.push([...ids]);
        if (ctx.attempt === 1) {
          return [
            { id: 'a', status: 'completed' },
            { id: 'b', status: 'failed', reason: 'invalid' },
            { id: 'intruder', status: 'completed' },
          ];
        }
        return ids.map((id) => ({ id, status: 'completed' as const }));
      },
    };
    const outcome = await runHandler(handler, ['a', 'b', 'c'], context());
    expect(outcome).toEqual({ completed: ['a', 'c'], failed: [{ id: 'b', reason: 'invalid' }], unhandled: [] });
    expect(batches).toEqual([['a', 'b', 'c'], ['c']]);
  });

  it('fails the whole batch on ItemError, and after the last attempt with the last message', async () => {
    const permanent: BatchHandler = {
      type: 'test',
      async handleBatch() {
        throw new ItemError('account suspended');
      },
    };
    expect(await runHandler(permanent, ['a', 'b'], context())).toEqual({
      completed: [],
      failed: [
        { id: 'a', reason: 'account suspended' },
        { id: 'b', reason: 'account suspended' },
      ],
      unhandled: [],
    });
    let tries = 0;
    const down: BatchHandler = {
      type: 'test',
      attempts: 2,
      backoffMs: 0,
      async handleBatch() {
        tries++;
        throw new Error(`upstream down #${tries}`);
      },
    };
    expect((await runHandler(down, ['a'], context())).failed).toEqual([{ id: 'a', reason: 'upstream down #2' }]);
  });

  it('keeps a reason Postgres can store: NUL shown as U+FFFD, at most 2,000 characters', async () => {
    const provider: BatchHandler = {
      type: 'test',
      async handleBatch() {
        return [
          { id: 'a', status: 'failed', reason: 'bad\u0000byte' },
          { id: 'b', status: 'failed', reason: `${'x'.repeat(1999)}\u0000tail` },
        ];
      },
    };
    expect((await runHandler(provider, ['a', 'b'], context())).failed).toEqual([
      { id: 'a', reason: 'bad\ufffdbyte' },
      { id: 'b', reason: `${'x'.repeat(1999)}\ufffd` },
    ]);
    const thrown: ItemHandler = {
      type: 'test',
      async handle() {
        throw new ItemError('\u0000');
      },
    };
    expect((await runHandler(thrown, ['c'], context())).failed).toEqual([{ id: 'c', reason: '\ufffd' }]);
  });
});

describe('runHandler progress', () => {
  it("writes progress as it goes: what is done, and what is in the handler's hands", async () => {
    let release: () => void = () => {};
    let entered: () => void = () => {};
    const inB = new Promise<void>((resolve) => {
      entered = resolve;
    });
    const handler: ItemHandler = {
      type: 'test',
      async handle(id) {
        if (id === 'b') {
          entered();
          await new Promise<void>((resolve) => {
            release = resolve;
          });
        }
      },
    };
    const progress = emptyProgress();
    const running = runHandler(handler, ['a', 'b', 'c'], context(), progress);
    await inB;
    expect(progress.completed).toEqual(['a']);
    expect([...progress.current]).toEqual(['b']);
    release();
    expect(await running).toEqual({ completed: ['a', 'b', 'c'], failed: [], unhandled: [] });
    expect([...progress.current]).toEqual([]);
  });

  it('marks the items a batch handler was working on when the signal fired', async () => {
    const controller = new AbortController();
    const handler: BatchHandler = {
      type: 'test',
      async handleBatch() {
        controller.abort(new Error('budget'));
        throw new Error('aborted');
      },
    };
    const progress = emptyProgress();
    const outcome = await runHandler(handler, ['a', 'b'], context(controller.signal), progress);
    expect(outcome.unhandled).toEqual(['a', 'b']);
    expect(progress.interrupted).toEqual(['a', 'b']);
  });
});

describe('runHandler with itemConcurrency', () => {
  /** Counts its calls in flight; each call yields to the event loop before it settles. */
  function countingHandler(itemConcurrency: number | undefined) {
    const counts = { inFlight: 0, peak: 0, calls: new Map<string, number>() };
    const handler: ItemHandler = {
      type: 'test',
      itemConcurrency,
      backoffMs: 0,
      async handle(id, ctx) {
        counts.inFlight++;
        counts.peak = Math.max(counts.peak, counts.inFlight);
        counts.calls.set(id, (counts.calls.get(id) ?? 0) + 1);
        try {
          await new Promise<void>((resolve) => setImmediate(resolve));
          if (id.startsWith('bad')) {
            throw new ItemError(`bad item ${id}`);
          }
          if (id.startsWith('flaky') && ctx.attempt === 1) {
            throw new Error('try again');
          }
        } finally {
          counts.inFlight--;
        }
      },
    };
    return { handler, counts };
  }

  it('runs up to itemConcurrency items at once and records each exactly once', async () => {
    const { handler, counts } = countingHandler(8);
    const ids = Array.from({ length: 1000 }, (_, i) =>
      i % 10 === 3 ? `bad-${i}` : i % 10 === 5 ? `flaky-${i}` : `ok-${i}`,
    );
    const outcome = await runHandler(handler, ids, context());
    expect(counts.peak).toBe(8);
    expect(outcome.unhandled).toEqual([]);
    expect(outcome.failed.map((f) => f.id).sort()).toEqual(ids.filter((id) => id.startsWith('bad')).sort());
    expect([...outcome.completed].sort()).toEqual(ids.filter((id) => !id.startsWith('bad')).sort());
    expect(outcome.completed.length + outcome.failed.length).toBe(ids.length);
    expect(counts.calls.get('flaky-5')).toBe(2);
    expect(counts.calls.get('bad-3')).toBe(1);
  });

  it('keeps one item at a time by default, in order', async () => {
    const { handler, counts } = countingHandler(undefined);
    const ids = ['a', 'b', 'c', 'd'];
    expect(await runHandler(handler, ids, context())).toEqual({ completed: ids, failed: [], unhandled: [] });
    expect(counts.peak).toBe(1);
  });

  it('hands back what no lane took and interrupts what was in hand when the signal fires', async () => {
    const controller = new AbortController();
    const ids = Array.from({ length: 20 }, (_, i) => `item-${i}`);
    let entered = 0;
    const handler: ItemHandler = {
      type: 'test',
      itemConcurrency: 5,
      async handle(id, ctx) {
        entered++;
        if (ids.indexOf(id) < 5) {
          return;
        }
        if (entered === 10) {
          controller.abort(new Error('budget'));
        }
        await new Promise<void>((_, reject) => {
          ctx.signal.throwIfAborted();
          ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason), { once: true });
        });
      },
    };
    const progress = emptyProgress();
    const outcome = await runHandler(handler, ids, context(controller.signal), progress);
    expect(entered).toBe(10);
    expect(outcome.completed.sort()).toEqual(ids.slice(0, 5).sort());
    expect(progress.interrupted.sort()).toEqual(ids.slice(5, 10).sort());
    expect(outcome.unhandled.sort()).toEqual(ids.slice(5).sort());
    expect(progress.current.size).toBe(0);
  });
});
