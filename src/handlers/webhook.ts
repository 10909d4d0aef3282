/**
 * The built-in `webhook` handler: POSTs each item, as JSON, to the URL in `query_params.url`.
 *
 * Delivery is at-least-once (a worker may die after the POST but before recording it), so every
 * request carries `x-opspad-idempotency-key` (`<operation_id>:<item_id>`, the same on every
 * retry) for the receiver to dedupe on. When a secret is configured the request is signed:
 * `x-opspad-signature: sha256=<hex HMAC-SHA256 of "<x-opspad-timestamp>.<raw body>">`. Putting
 * the timestamp inside the signed text lets receivers reject replays of old requests; see
 * {@link verifyWebhookSignature}.
 *
 * How the response maps onto the handler contract:
 * - 2xx: delivered.
 * - 429 or 5xx: {@link RetryableError}, honouring `Retry-After` (capped at 60 s).
 * - 3xx: {@link ItemError}. Redirects are not followed: fetch would turn the POST into a GET
 *   (dropping the body) and could lead outside `allowedHosts`.
 * - other 4xx: {@link ItemError} with `HTTP <status>: <start of the body>`; the receiver has
 *   refused this item and asking again will not change its mind.
 * - network error or timeout: a plain Error, retried with backoff like any transient failure.
 * - `ctx.signal` aborted (pause, cancel, shutdown): the abort is rethrown untouched, so the
 *   item is neither failed nor counted as a bad attempt.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { type ItemContext, ItemError, type ItemHandler, RetryableError } from './types.ts';

export interface WebhookHandlerOptions {
  /** HMAC key for `x-opspad-signature`; requests go unsigned when undefined or empty. */
  secret: string | undefined;
  /** Budget for the whole exchange, connect to end of response (default 10 000 ms). */
  timeoutMs?: number;
  /** When non-empty, the only hostnames `query_params.url` may name (case-insensitive). */
  allowedHosts?: readonly string[];
}

export interface VerifyWebhookSignatureInput {
  secret: string;
  /** The `x-opspad-timestamp` header as received (unix seconds). */
  timestamp: string | number | null | undefined;
  /** The raw request body, byte for byte as received (not re-serialized JSON). */
  body: string | Uint8Array;
  /** The `x-opspad-signature` header as received (`sha256=<hex>`). */
  signature: string | null | undefined;
  /** How far the timestamp may be from now, either way (default 300 s). */
  toleranceSeconds?: number;
}

const DEFAULT_TIMEOUT_MS = 10_000;
const DEFAULT_TOLERANCE_SECONDS = 300;
/** Longer hints are capped: a worker should not hold a batch idle for minutes on a hint. */
const MAX_RETRY_AFTER_MS = 60_000;
/** Error reasons quote this many characters of the response body. */
const REASON_BODY_CHARS = 200;
/** Enough bytes for 200 characters of any UTF-8 text. */
const REASON_BODY_BYTES = REASON_BODY_CHARS * 4;
/**
 * Bodies are drained up to this size so the keep-alive socket can be reused; anything larger is
 * cancelled instead (which closes the socket) rather than downloaded.
 */
const DRAIN_BODY_BYTES = 64 * 1024;
const SIGNATURE_PREFIX = 'sha256=';

/** The `x-opspad-signature` value for a body sent at `timestamp` (unix seconds). */
export function signWebhookPayload(secret: string, timestamp: string | number, body: string | Uint8Array): string {
  const hmac = createHmac('sha256', secret);
  hmac.update(`${timestamp}.`);
  hmac.update(body);
  return `${SIGNATURE_PREFIX}${hmac.digest('hex')}`;
}

/**
 * For receivers: whether a request really came from opspad with this secret, recently. False on
 * a missing or malformed header, a timestamp outside the tolerance, or a signature mismatch;
 * the comparison is constant-time so it leaks nothing about the expected value.
 */
export function verifyWebhookSignature(input: VerifyWebhookSignatureInput): boolean {
  const { secret, body, signature } = input;
  const tolerance = input.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS;
  const timestamp = typeof input.timestamp === 'number' ? String(input.timestamp) : input.timestamp;
  if (typeof timestamp !== 'string' || !/^\d{1,15}$/.test(timestamp)) {
    return false;
  }
  if (Math.abs(Math.floor(Date.now() / 1000) - Number(timestamp)) > tolerance) {
    return false;
  }
  if (typeof signature !== 'string' || !signature.startsWith(SIGNATURE_PREFIX)) {
    return false;
  }
  const givenHex = signature.slice(SIGNATURE_PREFIX.length);
  if (!/^[0-9a-fA-F]{64}$/.test(givenHex)) {
    return false;
  }
  const expected = Buffer.from(signWebhookPayload(secret, timestamp, body).slice(SIGNATURE_PREFIX.length), 'hex');
  return timingSafeEqual(expected, Buffer.from(givenHex, 'hex'));
}

/**
 * `Retry-After` in milliseconds: delay-seconds or an HTTP date, capped at 60 s; undefined when
 * absent or unreadable, so the worker's own backoff applies.
 */
function parseRetryAfter(value: string | null): number | undefined {
  if (value === null) {
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

/**
 * Reads at most `maxBytes` of the body and cancels the rest, which frees the socket either way.
 * Never throws: callers already know the status, and a body that breaks off mid-way changes
 * nothing about what to do with it.
 */
async function readBodyPrefix(response: Response, maxBytes: number): Promise<Uint8Array> {
  if (response.body === null) {
    return new Uint8Array(0);
  }
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    while (size < maxBytes) {
      const { done, value } = await reader.read();
      if (done) {
        break;
      }
      chunks.push(value);
      size += value.byteLength;
    }
  } catch {
    // Keep what arrived.
  } finally {
    await reader.cancel().catch(() => undefined);
  }
  return Buffer.concat(chunks).subarray(0, maxBytes);
}

async function bodySnippet(response: Response): Promise<string> {
  const text = new TextDecoder().decode(await readBodyPrefix(response, REASON_BODY_BYTES)).trim();
  // By code point, so a reason never ends in half a surrogate pair.
  return Array.from(text).slice(0, REASON_BODY_CHARS).join('');
}

function httpReason(status: number, snippet: string): string {
  return snippet === '' ? `HTTP ${status}` : `HTTP ${status}: ${snippet}`;
}

/** Node's fetch reports network failures as `TypeError('fetch failed')`; the detail is in `cause`. */
function describeNetworkError(error: unknown): string {
  const cause = error instanceof Error && error.cause !== undefined ? error.cause : error;
  const code = errorCode(cause);
  switch (code) {
    case 'ECONNREFUSED':
      return 'connection refused';
    case 'ECONNRESET':
      return 'connection reset by the server';
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return 'host not found (DNS lookup failed)';
    case 'ETIMEDOUT':
    case 'UND_ERR_CONNECT_TIMEOUT':
      return 'connect timed out';
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
      return 'host unreachable';
    case 'UND_ERR_SOCKET':
      return 'the server closed the connection';
    default: {
      const message = cause instanceof Error ? cause.message : String(cause);
      return code === undefined ? message : `${message} (${code})`;
    }
  }
}

function errorCode(error: unknown): string | undefined {
  if (typeof error !== 'object' || error === null) {
    return undefined;
  }
  const { code } = error as { code?: unknown };
  if (typeof code === 'string') {
    return code;
  }
  // Happy-eyeballs connects to several addresses and reports an AggregateError.
  if (error instanceof AggregateError) {
    return errorCode(error.errors[0]);
  }
  return undefined;
}

function normalizeHost(host: string): string {
  const lower = host.trim().toLowerCase();
  // URL.hostname keeps IPv6 brackets; accept the list written either way.
  return lower.startsWith('[') && lower.endsWith(']') ? lower.slice(1, -1) : lower;
}

function targetUrl(queryParams: ItemContext['queryParams'], allowedHosts: ReadonlySet<string>): URL {
  const raw = queryParams.url;
  let url: URL | undefined;
  if (typeof raw === 'string') {
    try {
      url = new URL(raw);
    } catch {
      url = undefined;
    }
  }
  if (url === undefined || (url.protocol !== 'http:' && url.protocol !== 'https:')) {
    throw new ItemError('query_params.url must be an http(s) URL');
  }
  if (allowedHosts.size > 0 && !allowedHosts.has(normalizeHost(url.hostname))) {
    throw new ItemError(`query_params.url host ${url.hostname} is not in the webhook allowed hosts`);
  }
  return url;
}

export function createWebhookHandler(options: WebhookHandlerOptions): ItemHandler {
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  if (!Number.isFinite(timeoutMs) || timeoutMs <= 0) {
    throw new RangeError(`webhook timeoutMs must be a positive number, got ${timeoutMs}`);
  }
  const secret = options.secret === '' ? undefined : options.secret;
  const allowedHosts = new Set((options.allowedHosts ?? []).map(normalizeHost).filter((host) => host !== ''));

  return {
    type: 'webhook',
    async handle(itemId: string, ctx: ItemContext): Promise<void> {
      const url = targetUrl(ctx.queryParams, allowedHosts);
      ctx.signal.throwIfAborted();

      const body = JSON.stringify({ operation_id: ctx.operationId, item_id: itemId, query_params: ctx.queryParams });
      const timestamp = String(Math.floor(Date.now() / 1000));
      const headers: Record<string, string> = {
        'content-type': 'application/json',
        'user-agent': 'opspad-webhook',
        'x-opspad-idempotency-key': ctx.idempotencyKey,
        'x-opspad-timestamp': timestamp,
      };
      if (secret !== undefined) {
        headers['x-opspad-signature'] = signWebhookPayload(secret, timestamp, body);
      }

      // The URL may carry a token in its query string; errors name only the host.
      const target = `POST to ${url.host}`;
      const timeout = AbortSignal.timeout(timeoutMs);
      let response: Response;
      try {
        response = await fetch(url, {
          method: 'POST',
          headers,
          body,
          redirect: 'manual',
          signal: AbortSignal.any([ctx.signal, timeout]),
        });
      } catch (error) {
        if (ctx.signal.aborted) {
          throw error;
        }
        if (timeout.aborted) {
          throw new Error(`webhook ${target} timed out after ${timeoutMs} ms`, { cause: error });
        }
        throw new Error(`webhook ${target} failed: ${describeNetworkError(error)}`, { cause: error });
      }

      const { status } = response;
      if (status >= 200 && status < 300) {
        // Delivered: whatever happens while draining the body (even an abort) cannot undo that.
        await readBodyPrefix(response, DRAIN_BODY_BYTES);
        ctx.logger.debug({ itemId, status, host: url.host }, 'webhook delivered');
        return;
      }

      const snippet = await bodySnippet(response);
      ctx.signal.throwIfAborted();
      if (status === 429 || status >= 500) {
        throw new RetryableError(httpReason(status, snippet), parseRetryAfter(response.headers.get('retry-after')));
      }
      if (status >= 300 && status < 400) {
        const location = response.headers.get('location');
        throw new ItemError(
          `HTTP ${status}: webhook redirects are not followed${location === null ? '' : ` (location: ${location.slice(0, REASON_BODY_CHARS)})`}`,
        );
      }
      throw new ItemError(httpReason(status, snippet));
    },
  };
}
