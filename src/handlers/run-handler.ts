/**
 * Runs a handler over one batch with the retry rules of the handler contract: ItemError fails an
 * item at once; other errors retry with exponential backoff (or the RetryableError's delay) up
 * to `attempts`, then fail with the last message. When the signal fires (pause, cancel,
 * shutdown), items not yet handled are returned as `unhandled` so they can be handed out again.
 */
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

const MAX_REASON_LENGTH = 2000;

function reasonOf(error: unknown): string {
  const text = error instanceof ItemError ? error.reason : error instanceof Error ? error.message : String(error);
  return (text || 'failed without a message').slice(0, MAX_REASON_LENGTH);
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

async function runItems(handler: ItemHandler, itemIds: readonly string[], ctx: HandlerContext): Promise<BatchOutcome> {
  const outcome: BatchOutcome = { completed: [], failed: [], unhandled: [] };
  const attempts = handler.attempts ?? HANDLER_DEFAULTS.attempts;
  for (let index = 0; index < itemIds.length; index++) {
    const id = itemIds[index] as string;
    if (ctx.signal.aborted) {
      outcome.unhandled.push(...itemIds.slice(index));
      break;
    }
    for (let attempt = 1; ; attempt++) {
      try {
        await handler.handle(id, { ...ctx, idempotencyKey: `${ctx.operationId}:${id}`, attempt });
        outcome.completed.push(id);
        break;
      } catch (error) {
        if (ctx.signal.aborted) {
          outcome.unhandled.push(id);
          break;
        }
        if (error instanceof ItemError || attempt >= attempts) {
          outcome.failed.push({ id, reason: reasonOf(error) });
          break;
        }
        ctx.logger.debug({ item_id: id, attempt, err: error }, 'item failed; retrying');
        try {
          await sleep(retryDelay(handler, attempt, error), ctx.signal);
        } catch {
          outcome.unhandled.push(id);
          break;
        }
      }
    }
  }
  return outcome;
}

async function runBatch(handler: BatchHandler, itemIds: readonly string[], ctx: HandlerContext): Promise<BatchOutcome> {
  const outcome: BatchOutcome = { completed: [], failed: [], unhandled: [] };
  const attempts = handler.attempts ?? HANDLER_DEFAULTS.attempts;
  let remaining = [...itemIds];
  for (let attempt = 1; remaining.length > 0; attempt++) {
    if (ctx.signal.aborted) {
      outcome.unhandled.push(...remaining);
      break;
    }
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
          outcome.failed.push({ id: result.id, reason: result.reason.slice(0, MAX_REASON_LENGTH) || 'failed' });
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
      break;
    }
    if (error instanceof ItemError || attempt >= attempts) {
      outcome.failed.push(...remaining.map((id) => ({ id, reason: reasonOf(error) })));
      break;
    }
    try {
      await sleep(retryDelay(handler, attempt, error), ctx.signal);
    } catch {
      outcome.unhandled.push(...remaining);
      break;
    }
  }
  return outcome;
}

export function runHandler(handler: Handler, itemIds: readonly string[], ctx: HandlerContext): Promise<BatchOutcome> {
  return isBatchHandler(handler) ? runBatch(handler, itemIds, ctx) : runItems(handler, itemIds, ctx);
}
