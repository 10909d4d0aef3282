/**
 * The contract between opspad's workers and the code that does the work on each item.
 *
 * A handler is registered for one `operation_type`. It either handles one item at a time
 * (`handle`) or a whole batch (`handleBatch`). Throwing {@link ItemError} fails an item for good,
 * with its reason; any other error is retried with exponential backoff up to `attempts` times,
 * then recorded as failed with the last error's message.
 */
import type { LimitKeySource } from '../domain/key-limits.ts';
import type { Logger } from '../logger.ts';

/**
 * `instanceof` across copies of opspad: a handler module may import `ItemError` from another
 * copy of the package than the one running it (a second install under node_modules, or the
 * sources next to the compiled code), and a plain `instanceof` would then fail and turn a
 * permanent failure into retries. Each class brands its instances with a registry symbol and
 * answers `instanceof` by the brand; subclasses keep the ordinary prototype check.
 */
function hasBrand(
  target: unknown,
  base: abstract new (...args: never[]) => unknown,
  brand: symbol,
  value: unknown,
): boolean {
  if (target !== base) {
    return Function.prototype[Symbol.hasInstance].call(target, value);
  }
  return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[brand] === true;
}

function brand(error: Error, symbol: symbol): void {
  Object.defineProperty(error, symbol, { value: true, enumerable: false });
}

const ITEM_ERROR = Symbol.for('opspad.ItemError');
const RETRYABLE_ERROR = Symbol.for('opspad.RetryableError');

/** A permanent failure of one item: recorded at once with `reason`, never retried. */
export class ItemError extends Error {
  static override [Symbol.hasInstance](value: unknown): boolean {
    // biome-ignore lint/complexity/noThisInStatic: the receiver tells a subclass (prototype check) from ItemError.
    return hasBrand(this, ItemError, ITEM_ERROR, value);
  }
  override readonly name = 'ItemError';
  constructor(
    readonly reason: string,
    options?: ErrorOptions,
  ) {
    super(reason, options);
    brand(this, ITEM_ERROR);
  }
}

/**
 * A transient failure that knows when to try again (e.g. HTTP 429 with Retry-After). Counts as
 * an attempt like any other error; `retryAfterMs` replaces the backoff delay for the next one.
 */
export class RetryableError extends Error {
  static override [Symbol.hasInstance](value: unknown): boolean {
    // biome-ignore lint/complexity/noThisInStatic: the receiver tells a subclass (prototype check) from RetryableError.
    return hasBrand(this, RetryableError, RETRYABLE_ERROR, value);
  }
  override readonly name = 'RetryableError';
  constructor(
    message: string,
    readonly retryAfterMs?: number,
    options?: ErrorOptions,
  ) {
    super(message, options);
    brand(this, RETRYABLE_ERROR);
  }
}

export interface HandlerContext {
  operationId: string;
  organizationId: string;
  operationType: string;
  queryParams: Readonly<Record<string, unknown>>;
  /**
   * Fired when the batch's time budget runs out, the operation is paused or cancelled, or the
   * worker shuts down. A handler that keeps running after it fires loses its slot after the grace
   * period (OPSPAD_BATCH_GRACE): its result is then ignored and its items handed out again.
   */
  signal: AbortSignal;
  /**
   * When the batch's time budget runs out (milliseconds since the epoch), for sizing a handler's
   * own timeouts; unset outside a worker.
   */
  deadline?: number;
  logger: Logger;
}

export interface ItemContext extends HandlerContext {
  /** `<operation_id>:<item_id>`: stable across retries and workers, for downstream dedupe. */
  idempotencyKey: string;
  /** 1 on the first try. */
  attempt: number;
}

export interface BatchContext extends HandlerContext {
  idempotencyKey(itemId: string): string;
  attempt: number;
}

/** What a batch handler says about one item. Items it leaves out are retried. */
export type ItemOutcome = { id: string; status: 'completed' } | { id: string; status: 'failed'; reason: string };

/** A problem with an operation's query_params, found when the operation is created. */
export interface QueryParamsIssue {
  /** The path of the field, e.g. `query_params.url`. */
  field: string;
  /** What is wrong and what to do. */
  message: string;
}

/** A handler's provider limits per key (see `HandlerSettings.limits`). */
export interface HandlerLimits {
  /** The key an operation's items count against (default: its organization). */
  key?(operation: LimitKeySource): string;
  rate?: { max: number; durationMs: number };
  concurrency?: number;
}

export interface HandlerSettings {
  /** The operation_type this handler serves. Letters, digits, `_`, `-` and `.`. */
  type: string;
  /** Batches of this type one worker process runs at once (default 4). */
  concurrency?: number;
  /**
   * Items of one batch a per-item handler (`handle`) runs at once (default 1: one after
   * another). Items in flight in one process: up to `concurrency` × `itemConcurrency`.
   * Ignored by a batch handler, which gets the whole batch at once.
   */
  itemConcurrency?: number;
  /** Overrides the operation's batch_size for background work. */
  batchSize?: number;
  /** At most `max` items per `durationMs` of the type as a whole, across all workers (BullMQ rate limiter). */
  rateLimit?: { max: number; durationMs: number };
  /**
   * The provider's limits, per key (docs/provider-limits.md): at most `rate.max` items per
   * `rate.durationMs` and `concurrency` items in flight for each key, across all workers. The key
   * is the organization's unless `key` computes one from the operation (e.g. the account in
   * query_params), always within the organization. An organization may have its own figures
   * (`opspad orgs limits --handler`). A key at its limit parks its batches without holding a slot.
   */
  limits?: HandlerLimits;
  /** Tries per item before it is recorded as failed (default 3). */
  attempts?: number;
  /** First retry delay; doubles on each retry (default 200 ms). */
  backoffMs?: number;
  /**
   * Checks query_params when a background operation of this type is created: any issue refuses
   * the create with a 400 that names the field, before anything is stored.
   */
  checkQueryParams?(queryParams: Readonly<Record<string, unknown>>): readonly QueryParamsIssue[];
  /**
   * Time budget of one batch of this type, in milliseconds (default OPSPAD_BATCH_TIMEOUT): when it
   * runs out `ctx.signal` fires; items not started yet go back to pending.
   */
  batchTimeoutMs?: number;
}

export interface ItemHandler extends HandlerSettings {
  handle(itemId: string, ctx: ItemContext): Promise<unknown>;
}

export interface BatchHandler extends HandlerSettings {
  handleBatch(itemIds: readonly string[], ctx: BatchContext): Promise<readonly ItemOutcome[]>;
}

export type Handler = ItemHandler | BatchHandler;

/**
 * Declares a handler with its types checked where it is written: the item id and `ctx` of
 * `handle` (or the ids and `ctx` of `handleBatch`) are typed, and a misspelt setting is an
 * error. It returns the handler unchanged; export it (default, or in a `handlers` array) from a
 * module named in `OPSPAD_HANDLERS`, or pass it to `createOpspad({ handlers: [...] })`.
 *
 * @example
 * import { defineHandler, ItemError } from 'opspad';
 *
 * export default defineHandler({
 *   type: 'send_sms',
 *   concurrency: 8,
 *   async handle(contactId, ctx) {
 *     const sent = await sms.send(contactId, { idempotencyKey: ctx.idempotencyKey, signal: ctx.signal });
 *     if (!sent.phone) throw new ItemError('no phone number'); // permanent: recorded with this reason
 *   }, // any other error is retried (attempts, backoffMs), then recorded as failed
 * });
 */
export function defineHandler(handler: ItemHandler): ItemHandler;
export function defineHandler(handler: BatchHandler): BatchHandler;
export function defineHandler(handler: Handler): Handler {
  return handler;
}

export function isBatchHandler(handler: Handler): handler is BatchHandler {
  return typeof (handler as BatchHandler).handleBatch === 'function';
}
