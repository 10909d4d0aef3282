/**
 * The built-in `webhook` handler: POSTs each item to the URL in `query_params.url`, signed in the
 * Standard Webhooks format with the organization's own secret, through the egress guard.
 *
 * What a receiver gets (see webhook-payload.ts for the body):
 * - `webhook-id: msg_<hex>` — the same for every retry of one item of one operation; dedupe on it
 *   (delivery is at-least-once: a worker may die after the POST and before recording it).
 * - `webhook-timestamp: <unix seconds>` — reject old ones to stop replays.
 * - `webhook-signature: v1,<base64>` — per organization; during a rotation one per secret.
 * - `traceparent` (W3C trace context), when opspad exports traces: the receiver's own spans join
 *   the operation's trace, under the batch that sent it. Not signed, and says nothing secret.
 * Verify with any Standard Webhooks library, e.g. `new Webhook(secret).verify(body, headers)`
 * from the `standardwebhooks` npm package.
 *
 * Where it may POST: `query_params.url` is checked when the operation is created (a 400 naming
 * the field) and again for every request by the egress guard (src/egress/), on the address the
 * socket connects to; private, loopback, link-local and other non-public addresses are refused
 * unless `OPSPAD_WEBHOOK_ALLOW` lists them.
 *
 * How the answer maps onto the handler contract. Reasons are fixed phrases: nothing the receiver
 * sends (body, headers, a redirect's Location) reaches a failure reason.
 * - 2xx: delivered.
 * - 429 or 5xx: {@link RetryableError} "HTTP 503 from the receiver", honouring `Retry-After`
 *   (capped at 60 s).
 * - 3xx: {@link ItemError}. Redirects are not followed: the guard would have to check every hop,
 *   and a receiver that moved should be given its new URL.
 * - other 4xx: {@link ItemError} "HTTP 400 from the receiver": asking again will not help.
 * - refused by the guard: {@link ItemError} "address not allowed".
 * - network error or timeout: a plain Error with a fixed phrase, retried with backoff.
 * - `ctx.signal` aborted (pause, cancel, shutdown): the abort is rethrown untouched, so the
 *   item is neither failed nor counted as a bad attempt.
 */
import { context, propagation } from '@opentelemetry/api';
import { createEgressGuard, EgressError, type EgressGuard } from '../egress/index.ts';
import { BUILT_IN_CONCURRENCY } from './built-in-concurrency.ts';
import { type ItemContext, ItemError, type ItemHandler, RetryableError } from './types.ts';
import { webhookBody, webhookQueryParamsIssues } from './webhook-payload.ts';
import { signWebhook, webhookMessageId } from './webhook-signature.ts';

export interface WebhookHandlerOptions {
  /** The organization's signing secrets, current first (`webhookSigningSecrets` in the store). */
  signingSecrets(organizationId: string): Promise<readonly string[]>;
  /** The egress guard requests go through (default: no exceptions, the system resolver). */
  guard?: EgressGuard;
  /** Budget for the whole exchange, connect to end of response (default 10 000 ms). */
  timeoutMs?: number;
  /**
   * How long an organization's secrets are reused before they are read again (default 5 000
   * ms). A rotation reaches the workers within this time; the previous secret keeps signing
   * through the grace period, so receivers see no gap.
   */
  secretCacheMs?: number;
  /** Batches one worker process runs at once (OPSPAD_WEBHOOK_CONCURRENCY). */
  concurrency?: number;
  /** Requests one batch has in flight (OPSPAD_WEBHOOK_ITEM_CONCURRENCY). */
  itemConcurrency?: number;
}

const DEFAULT_TIMEOUT_MS = 10_000;
const DEFAULT_SECRET_CACHE_MS = 5_000;
/** Past this many organizations the cache starts over rather than grow without bound. */
const MAX_CACHED_ORGANIZATIONS = 10_000;
/** Longer hints are capped: a worker should not hold a batch idle for minutes on a hint. */
const MAX_RETRY_AFTER_MS = 60_000;

/**
 * `Retry-After` in milliseconds: delay-seconds or an HTTP date, capped at 60 s; undefined when
 * absent or unreadable, so the worker's own backoff applies.
 */
function parseRetryAfter(value: string | string[] | undefined): number | undefined {
  if (typeof value !== 'string') {
    return undefined;
  }
  const trimmed = value.trim();
  let ms: number;
  if (/^\d+$/.test(trimmed)) {
    ms = Number(trimmed) * 1000;
  } else if (/[a-z]/i.test(trimmed)) {
    // Date.parse accepts bare numbers like "1.5" as dates; an HTTP date always has letters.
    const at = Date.parse(trimmed);
    if (!Number.isFinite(at)) {
      return undefined;
    }
    ms = Math.max(0, at - Date.now());
  } else {
    return undefined;
  }
  return Math.min(ms, MAX_RETRY_AFTER_MS);
}

/** Caches each organization's secrets for `ttlMs`, one read at a time per organization. */
function secretCache(read: (organizationId: string) => Promise<readonly string[]>, ttlMs: number) {
  const cache = new Map<string, { until: number; secrets: Promise<readonly string[]> }>();
  return (organizationId: string): Promise<readonly string[]> => {
    const now = Date.now();
    const hit = cache.get(organizationId);
    if (hit && hit.until > now) {
      return hit.secrets;
    }
    if (cache.size >= MAX_CACHED_ORGANIZATIONS) {
      cache.clear();
    }
    const secrets = read(organizationId);
    cache.set(organizationId, { until: now + ttlMs, secrets });
    // A failed read is not kept: the next item asks the database again.
    secrets.catch(() => cache.delete(organizationId));
    return secrets;
  };
}

/**
 * Why no item of an operation can be sent — its URL or payload is unusable (operations older
 * than the create's check) — or null. Judged once a batch: its items share one query_params
 * object (see createWebhookHandler); the guard still checks each request's address.
 */
function unsendable(queryParams: ItemContext['queryParams'], guard: EgressGuard): string | null {
  const checked = guard.checkUrl(queryParams.url);
  if (!checked.ok) {
    return checked.problem === 'address_not_allowed'
      ? 'address not allowed'
      : `query_params.url ${checked.problem === 'not_http' ? 'must be an http(s) URL' : checked.message}`;
  }
  const issue = webhookQueryParamsIssues(queryParams, guard).find((i) => i.field !== 'query_params.url');
  return issue === undefined ? null : `${issue.field} ${issue.message}`;
}

export function createWebhookHandler(options: WebhookHandlerOptions): ItemHandler {
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  if (!Number.isFinite(timeoutMs) || timeoutMs <= 0) {
    throw new RangeError(`webhook timeoutMs must be a positive number, got ${timeoutMs}`);
  }
  const guard = options.guard ?? createEgressGuard();
  const secretsOf = secretCache(options.signingSecrets, options.secretCacheMs ?? DEFAULT_SECRET_CACHE_MS);
  // The verdict on each batch's query_params object, gone with the batch.
  const verdicts = new WeakMap<object, string | null>();

  return {
    type: 'webhook',
    concurrency: options.concurrency ?? BUILT_IN_CONCURRENCY.webhook.concurrency,
    itemConcurrency: options.itemConcurrency ?? BUILT_IN_CONCURRENCY.webhook.itemConcurrency,
    checkQueryParams: (queryParams) => webhookQueryParamsIssues(queryParams, guard),
    async handle(itemId: string, ctx: ItemContext): Promise<void> {
      let verdict = verdicts.get(ctx.queryParams);
      if (verdict === undefined) {
        verdict = unsendable(ctx.queryParams, guard);
        verdicts.set(ctx.queryParams, verdict);
      }
      if (verdict !== null) {
        throw new ItemError(verdict);
      }
      ctx.signal.throwIfAborted();
      const secrets = await secretsOf(ctx.organizationId);
      ctx.signal.throwIfAborted();

      const id = webhookMessageId(ctx.operationId, itemId);
      const timestamp = Math.floor(Date.now() / 1000);
      const body = webhookBody({
        organizationId: ctx.organizationId,
        operationId: ctx.operationId,
        operationType: ctx.operationType,
        itemId,
        attempt: ctx.attempt,
        timestamp,
        payload: ctx.queryParams.payload,
      });
      // Empty unless traces are on (the API's propagator is a no-op until an SDK registers one).
      const traceHeaders: Record<string, string> = {};
      propagation.inject(context.active(), traceHeaders);
      let status: number;
      let retryAfter: string | string[] | undefined;
      try {
        const response = await guard.request(String(ctx.queryParams.url), {
          method: 'POST',
          headers: {
            ...traceHeaders,
            'content-type': 'application/json',
            'user-agent': 'opspad-webhook',
            'webhook-id': id,
            'webhook-timestamp': String(timestamp),
            'webhook-signature': signWebhook(secrets, id, timestamp, body),
          },
          body,
          timeoutMs,
          signal: ctx.signal,
        });
        status = response.status;
        retryAfter = response.headers['retry-after'];
      } catch (error) {
        if (ctx.signal.aborted || !(error instanceof EgressError)) {
          throw error;
        }
        ctx.logger.debug({ itemId, code: error.code, err: error.cause }, 'webhook not delivered');
        if (error.code === 'address_not_allowed' || error.code === 'invalid_url') {
          throw new ItemError(error.message);
        }
        throw new Error(error.code === 'timeout' ? `timed out after ${timeoutMs} ms` : error.message, { cause: error });
      }

      if (status >= 200 && status < 300) {
        ctx.logger.debug({ itemId, status }, 'webhook delivered');
        return;
      }
      if (status === 429 || status >= 500) {
        throw new RetryableError(`HTTP ${status} from the receiver`, parseRetryAfter(retryAfter));
      }
      if (status >= 300 && status < 400) {
        throw new ItemError(`HTTP ${status} from the receiver (redirects are not followed)`);
      }
      throw new ItemError(`HTTP ${status} from the receiver`);
    },
  };
}
