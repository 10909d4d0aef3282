/**
 * Provider limits per key: what a handler's `limits` declare (a rate in items per interval and a
 * concurrency in items in flight, per key — the organization, or what the provider counts, such
 * as the account an operation sends from), and the rule that grants a batch its items, as a pure
 * function. The queue applies it atomically for the whole fleet: a Redis script
 * (queue/key-limits-redis.ts, which must stay equivalent to {@link grantItems}) or a locked
 * Postgres transaction (queue/key-limits-postgres.ts, which calls it).
 *
 * The rate is a token bucket of `max` items refilled over `intervalMs`: a key that has been idle
 * may start with a burst of `max`, and over any longer stretch it gets `max` per interval. A
 * batch waits for as many tokens as it wants (capped at `max`), so a slow rate hands out whole
 * batches rather than a stream of one-item ones. The concurrency counts the items of the batches
 * holding the key now; a batch gets what is free, down to one item.
 */
import { createHash } from 'node:crypto';

export interface KeyRate {
  /** Items per interval. */
  max: number;
  intervalMs: number;
}

/** The limits in force for one key: the handler's own, or an organization's override. */
export interface KeyLimits {
  rate?: KeyRate;
  /** Items of the key in flight at once, across the fleet. */
  concurrency?: number;
}

/** What a limit key is computed from: the operation's organization, type and query_params. */
export interface LimitKeySource {
  organizationId: string;
  operationType: string;
  queryParams: Readonly<Record<string, unknown>>;
}

/** The state a grant is decided on, read atomically with the decision. */
export interface KeyLimitState {
  /** Tokens in the bucket when last written, and when (ms); undefined: a full bucket. */
  bucket?: { tokens: number; atMs: number };
  /** Items held by other batches of the key now (lapsed holds not counted). */
  held: number;
}

export interface KeyGrant {
  /** Items the batch may lease (0: it must wait). */
  items: number;
  /** The bucket to write back (when there is a rate). */
  bucket?: { tokens: number; atMs: number };
  /** When refused by the rate: how long until the tokens it wants are there. */
  waitMs: number;
  /** Which limit refused it, when it was refused. */
  limitedBy?: 'rate' | 'concurrency';
}

/** Tokens in a bucket at `nowMs`, refilled since it was written. */
export function tokensAt(rate: KeyRate, bucket: KeyLimitState['bucket'], nowMs: number): number {
  if (!bucket) {
    return rate.max;
  }
  return Math.min(rate.max, bucket.tokens + (Math.max(0, nowMs - bucket.atMs) * rate.max) / rate.intervalMs);
}

/** The items a batch wanting `want` may lease now under `limits`, and the state to write. */
export function grantItems(limits: KeyLimits, state: KeyLimitState, want: number, nowMs: number): KeyGrant {
  let items = Math.max(0, Math.floor(want));
  if (limits.concurrency !== undefined) {
    items = Math.min(items, Math.max(0, limits.concurrency - state.held));
    if (items === 0) {
      return { items: 0, waitMs: 0, limitedBy: 'concurrency' };
    }
  }
  if (limits.rate === undefined) {
    return { items, waitMs: 0 };
  }
  const { rate } = limits;
  const tokens = tokensAt(rate, state.bucket, nowMs);
  const needed = Math.min(items, rate.max);
  if (tokens < needed) {
    return {
      items: 0,
      bucket: { tokens, atMs: nowMs },
      waitMs: Math.max(1, Math.ceil(((needed - tokens) * rate.intervalMs) / rate.max)),
      limitedBy: 'rate',
    };
  }
  items = Math.min(items, Math.floor(tokens));
  return { items, bucket: { tokens: tokens - items, atMs: nowMs }, waitMs: 0 };
}

/** The longest key a handler's `limits.key` may return as it is; longer ones are hashed. */
export const LIMIT_KEY_MAX_LENGTH = 200;

/**
 * The key a batch counts against, always inside its organization (`<organization id>` or
 * `<organization id>:<key>`): a tenant choosing another tenant's account name in query_params
 * reaches a key of its own, never the other's. A key the handler returns that is not a short
 * printable string (too long, control characters) is replaced by its SHA-256, so a tenant cannot
 * make keys of any size; one that is not a string, or a key function that throws, counts against
 * the organization's own key.
 */
export function limitKeyOf(source: LimitKeySource, key: ((source: LimitKeySource) => unknown) | undefined): string {
  if (!key) {
    return source.organizationId;
  }
  let value: unknown;
  try {
    value = key(source);
  } catch {
    return source.organizationId;
  }
  if (typeof value !== 'string' || value === '') {
    return source.organizationId;
  }
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is refused.
  const printable = value.length <= LIMIT_KEY_MAX_LENGTH && !/[\u0000-\u001f\u007f]/.test(value);
  const safe = printable ? value : `sha256:${createHash('sha256').update(value).digest('hex')}`;
  return `${source.organizationId}:${safe}`;
}

/** The handler's own key (what an organization's override names) from a full limit key. */
export function ownKeyOf(limitKey: string): string {
  const colon = limitKey.indexOf(':');
  return colon === -1 ? '' : limitKey.slice(colon + 1);
}

/** An override's figures on top of the handler's own (an absent figure keeps the handler's). */
export function withOverride(own: KeyLimits, override: KeyLimits | undefined): KeyLimits {
  if (!override) {
    return own;
  }
  return { rate: override.rate ?? own.rate, concurrency: override.concurrency ?? own.concurrency };
}

/** What `get` and the context fragment say of an operation whose work waits on a provider limit. */
export interface OperationThrottle {
  /** The handler's key it counts against (null: its organization's). */
  limit_key: string | null;
  limited_by: 'rate' | 'concurrency';
  rate: { max: number; interval_ms: number } | null;
  concurrency: number | null;
  /** Until when it is expected to wait, renewed while it does. */
  until: string;
}

const INTERVAL_WORDS: Record<number, string> = { 1000: 'second', 60000: 'minute', 3600000: 'hour' };

/** "20 items per second", "5 items in flight", or both, for an assistant to read. */
export function throttleWords(throttle: Pick<OperationThrottle, 'rate' | 'concurrency'>): string {
  const parts: string[] = [];
  if (throttle.rate) {
    const per = INTERVAL_WORDS[throttle.rate.interval_ms] ?? `${throttle.rate.interval_ms} ms`;
    parts.push(`${throttle.rate.max} items per ${per}`);
  }
  if (throttle.concurrency !== null) {
    parts.push(`${throttle.concurrency} items in flight`);
  }
  return parts.join(', ');
}

/** The advice `get` gives while an operation is throttled. */
export function throttledAdvice(throttle: OperationThrottle): string {
  const key = throttle.limit_key === null ? 'its organization' : `key "${throttle.limit_key}"`;
  return `Workers run this operation at its provider's limit for ${key} (${throttleWords(throttle)}): it is throttled, not stalled. Nothing to resume; get to check on it.`;
}
