/**
 * The built-in `demo` handler: does no real work, for demos and benchmarks.
 *
 * `query_params.latency_ms` (0..60000, default 0) is waited once per batch, as if the batch's
 * items were handled concurrently; `query_params.failure_rate` (0..1, default 0) fails that
 * share of items. Which items fail depends only on the item id (see {@link demoFails}), so a
 * rerun or a retry fails exactly the same ones, and a demo of `retry_failed` is reproducible.
 * With both at 0 a batch completes at once, without timers: the path benchmarks measure.
 */
import { createHash } from 'node:crypto';
import { BUILT_IN_CONCURRENCY } from './built-in-concurrency.ts';
import type { BatchContext, BatchHandler, ItemOutcome } from './types.ts';

export const DEMO_MAX_LATENCY_MS = 60_000;

interface DemoParams {
  latencyMs: number;
  failureRate: number;
}

/**
 * Whether the demo handler fails `itemId` at `rate`: the first 4 bytes of SHA-1(item id), read
 * as a fraction of 2^32, fall below `rate`. SHA-1 spreads similar ids (`item-1`, `item-2`)
 * evenly, so about `rate` of any large set of ids fails.
 */
export function demoFails(itemId: string, rate: number): boolean {
  if (!(rate > 0)) {
    return false;
  }
  if (rate >= 1) {
    return true;
  }
  const fraction = createHash('sha1').update(itemId).digest().readUInt32BE(0) / 2 ** 32;
  return fraction < rate;
}

function numberParam(value: unknown, fallback: number, max: number): number | undefined {
  if (value === undefined) {
    return fallback;
  }
  return typeof value === 'number' && Number.isFinite(value) && value >= 0 && value <= max ? value : undefined;
}

/** The parameters, or what is wrong with them (naming each bad parameter). */
function parseParams(queryParams: BatchContext['queryParams']): DemoParams | string {
  const latencyMs = numberParam(queryParams.latency_ms, 0, DEMO_MAX_LATENCY_MS);
  const failureRate = numberParam(queryParams.failure_rate, 0, 1);
  const problems: string[] = [];
  if (latencyMs === undefined) {
    problems.push(`query_params.latency_ms must be a number from 0 to ${DEMO_MAX_LATENCY_MS}`);
  }
  if (failureRate === undefined) {
    problems.push('query_params.failure_rate must be a number from 0 to 1');
  }
  if (latencyMs === undefined || failureRate === undefined) {
    return problems.join('; ');
  }
  return { latencyMs, failureRate };
}

/** Resolves after `ms`, or rejects with the signal's reason as soon as it is aborted. */
function wait(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

export interface DemoHandlerOptions {
  /** Batches one worker process runs at once (OPSPAD_DEMO_CONCURRENCY). */
  concurrency?: number;
}

export function createDemoHandler(options: DemoHandlerOptions = {}): BatchHandler {
  return {
    type: 'demo',
    concurrency: options.concurrency ?? BUILT_IN_CONCURRENCY.demo.concurrency,
    async handleBatch(itemIds: readonly string[], ctx: BatchContext): Promise<readonly ItemOutcome[]> {
      const params = parseParams(ctx.queryParams);
      if (typeof params === 'string') {
        // Bad parameters fail every item for good: retrying cannot fix them.
        return itemIds.map((id) => ({ id, status: 'failed', reason: params }));
      }
      const { latencyMs, failureRate } = params;
      if (latencyMs > 0) {
        await wait(latencyMs, ctx.signal);
      }
      if (failureRate === 0) {
        return itemIds.map((id) => ({ id, status: 'completed' }));
      }
      const reason = `demo failure (failure_rate ${failureRate})`;
      return itemIds.map((id) =>
        demoFails(id, failureRate) ? { id, status: 'failed', reason } : { id, status: 'completed' },
      );
    },
  };
}
