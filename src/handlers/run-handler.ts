/**
 * Runs a handler over one batch with the retry rules of the handler contract: ItemError fails an
 * item at once; other errors retry with exponential backoff (or the RetryableError's delay) up
 * to `attempts`, then fail with the last message. When the signal fires (pause, cancel,
 * shutdown, the batch's time budget), items not yet handled are returned as `unhandled` so they
 * can be handed out again.
 *
 * Progress is written into a {@link BatchProgress} as it happens, so a caller that stops waiting
 * (a handler that ignores its signal) can still record the items finished before that, and knows
 * which items were in the handler's hands when it stopped.
 */
import { getMaxListeners, setMaxListeners } from 'node:events';
import { HANDLER_DEFAULTS } from './registry.ts';
import {
  type BatchHandler,
  type Handler,
  type HandlerContext,
  ItemError,
  type ItemHandler,
  isBatchHandler,
  RetryableError,
} from './types.ts';

export interface BatchOutcome {
  completed: string[];
  failed: { id: string; reason: string }[];
  unhandled: string[];
}

/** A batch's outcome while it runs. */
export interface BatchProgress extends BatchOutcome {
  /** The items in the handler's hands right now. */
  current: Set<string>;
  /** Items whose handling the signal cut short (they are also `unhandled`). */
  interrupted: string[];
  /** The last error a current item failed with, when it is waiting to be retried. */
  lastError: string | undefined;
}

export function emptyProgress(): BatchProgress {
  return {
    completed: [],
    failed: [],
    unhandled: [],
    current: new Set(),
    interrupted: [],
    lastError: undefined,
  };
}

const MAX_REASON_LENGTH = 2000;

/**
 * A reason as the ledger keeps it: at most MAX_REASON_LENGTH characters, and any NUL (which a
 * Postgres text cannot hold, and a provider's error text may carry) shown as U+FFFD, so the
 * batch's record is not refused for one item's words.
 */
function storedReason(text: string, fallback: string): string {
  return (text || fallback).slice(0, MAX_REASON_LENGTH).replaceAll('\u0000', '\ufffd');
}

function reasonOf(error: unknown): string {
  const text = error instanceof ItemError ? error.reason : error instanceof Error ? error.message : String(error);
  return storedReason(text, 'failed without a message');
}

function retryDelay(handler: Handler, attempt: number, error: unknown): number {
  if (error instanceof RetryableError && error.retryAfterMs !== undefined) {
    return error.retryAfterMs;
  }
  return (handler.backoffMs ?? HANDLER_DEFAULTS.backoffMs) * 2 ** (attempt - 1);
}

/** Resolves after `ms`, or rejects as soon as `signal` fires. */
function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) {
      reject(signal.reason);
      return;
    }
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * Handles one item with its retries; records it in `outcome` once (completed, failed, or
 * unhandled and interrupted when the signal cut it short). Never rejects.
 */
async function runItem(
  handler: ItemHandler,
  id: string,
  ctx: HandlerContext,
  outcome: BatchProgress,
  attempts: number,
): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await handler.handle(id, { ...ctx, idempotencyKey: `${ctx.operationId}:${id}`, attempt });
      outcome.completed.push(id);
      return;
    } catch (error) {
      if (ctx.signal.aborted) {
        outcome.unhandled.push(id);
        outcome.interrupted.push(id);
        return;
      }
      if (error instanceof ItemError || attempt >= attempts) {
        outcome.failed.push({ id, reason: reasonOf(error) });
        return;
      }
      outcome.lastError = reasonOf(error);
      ctx.logger.debug({ item_id: id, attempt, err: error }, 'item failed; retrying');
      try {
        await sleep(retryDelay(handler, attempt, error), ctx.signal);
      } catch {
        outcome.unhandled.push(id);
        outcome.interrupted.push(id);
        return;
      }
    }
  }
}

/**
 * Up to `itemConcurrency` lanes take the batch's items in order, one at a time each: the
 * promises held are the lanes, never one per item. Once the signal fires no lane takes another
 * item, and the items no lane took are handed back as unhandled.
 */
async function runItems(
  handler: ItemHandler,
  itemIds: readonly string[],
  ctx: HandlerContext,
  outcome: BatchProgress,
): Promise<void> {
  const attempts = handler.attempts ?? HANDLER_DEFAULTS.attempts;
  const width = Math.min(handler.itemConcurrency ?? HANDLER_DEFAULTS.itemConcurrency, itemIds.length);
  // Each item in hand may listen to the batch's signal (its request, its retry's wait): expected
  // listeners, which Node would otherwise report as a leak past 10.
  const listeners = 2 * width + 10;
  if (getMaxListeners(ctx.signal) < listeners) {
    setMaxListeners(listeners, ctx.signal);
  }
  let next = 0;
  const lane = async (): Promise<void> => {
    while (next < itemIds.length && !ctx.signal.aborted) {
      const id = itemIds[next++] as string;
      // The error of an item no longer in hand says nothing of the ones that are.
      if (outcome.current.size === 0) {
        outcome.lastError = undefined;
      }
      outcome.current.add(id);
      await runItem(handler, id, ctx, outcome, attempts);
      outcome.current.delete(id);
    }
  };
  const lanes: Promise<void>[] = [];
  for (let index = 0; index < width; index++) {
    lanes.push(lane());
  }
  await Promise.all(lanes);
  if (next < itemIds.length) {
    outcome.unhandled.push(...itemIds.slice(next));
  }
}

async function runBatch(
  handler: BatchHandler,
  itemIds: readonly string[],
  ctx: HandlerContext,
  outcome: BatchProgress,
): Promise<void> {
  const attempts = handler.attempts ?? HANDLER_DEFAULTS.attempts;
  let remaining = [...itemIds];
  for (let attempt = 1; remaining.length > 0; attempt++) {
    if (ctx.signal.aborted) {
      outcome.unhandled.push(...remaining);
      break;
    }
    outcome.current = new Set(remaining);
    let error: unknown;
    try {
      const wanted = new Set(remaining);
      const results = await handler.handleBatch(remaining, {
        ...ctx,
        idempotencyKey: (itemId) => `${ctx.operationId}:${itemId}`,
        attempt,
      });
      for (const result of results) {
        // Ignore ids outside the batch and repeats: a handler cannot record what it was not given.
        if (!wanted.delete(result.id)) {
          continue;
        }
        if (result.status === 'completed') {
          outcome.completed.push(result.id);
        } else {
          outcome.failed.push({ id: result.id, reason: storedReason(result.reason, 'failed') });
        }
      }
      remaining = [...wanted];
      if (remaining.length === 0) {
        break;
      }
      error = new Error('the handler returned no outcome for this item');
    } catch (thrown) {
      error = thrown;
    }
    if (ctx.signal.aborted) {
      outcome.unhandled.push(...remaining);
      outcome.interrupted.push(...remaining);
      break;
    }
    if (error instanceof ItemError || attempt >= attempts) {
      outcome.failed.push(...remaining.map((id) => ({ id, reason: reasonOf(error) })));
      break;
    }
    outcome.current = new Set(remaining);
    outcome.lastError = reasonOf(error);
    try {
      await sleep(retryDelay(handler, attempt, error), ctx.signal);
    } catch {
      outcome.unhandled.push(...remaining);
      outcome.interrupted.push(...remaining);
      break;
    }
  }
  outcome.current.clear();
}

/**
 * Runs `handler` over `itemIds`, writing into `progress` as it goes; resolves with the outcome
 * (the same lists `progress` holds).
 */
export async function runHandler(
  handler: Handler,
  itemIds: readonly string[],
  ctx: HandlerContext,
  progress: BatchProgress = emptyProgress(),
): Promise<BatchOutcome> {
  await (isBatchHandler(handler)
    ? runBatch(handler, itemIds, ctx, progress)
    : runItems(handler, itemIds, ctx, progress));
  return { completed: progress.completed, failed: progress.failed, unhandled: progress.unhandled };
}
