/**
 * The transport of `opspad/client`: one JSON request with the API key, a timeout, and every
 * refusal turned into an {@link OpspadError}. Uses the global `fetch` (or the one passed in).
 */
import { OpspadError } from './errors.ts';

export interface ClientOptions {
  /** Where opspad serves its API, e.g. `http://127.0.0.1:3000` (a path prefix is kept). */
  baseUrl: string;
  /** An organization's API key (`opspad keys create`). */
  apiKey: string;
  /** Per request, in milliseconds; an event stream's only until its headers arrive. Default 30 000. */
  timeoutMs?: number;
  /** Headers added to every request (e.g. for a proxy). */
  headers?: Readonly<Record<string, string>>;
  /** A fetch of your own (instrumented, proxied, or a test double); default: the global fetch. */
  fetch?: typeof fetch;
}

export interface RequestOptions {
  /** Aborts the call: the promise rejects with the signal's reason. */
  signal?: AbortSignal;
}

export type Query = Readonly<Record<string, string | number | boolean | null | undefined>>;

export interface Call {
  method: 'GET' | 'POST' | 'PUT';
  /** Path under the base URL; each id already encoded (see {@link segment}). */
  path: string;
  query?: Query;
  body?: unknown;
  headers?: Readonly<Record<string, string>>;
  signal?: AbortSignal;
  /** Statuses besides 2xx whose body is an answer, not an error (503 of /readyz). */
  answers?: readonly number[];
}

export const DEFAULT_TIMEOUT_MS = 30_000;

/** An id as one path segment: never a way to reach another route. */
export function segment(value: string): string {
  return encodeURIComponent(value);
}

function queryString(query: Query | undefined): string {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query ?? {})) {
    if (value !== undefined && value !== null) {
      params.set(name, String(value));
    }
  }
  const text = params.toString();
  return text ? `?${text}` : '';
}

function retryAfter(response: Response): number | undefined {
  const value = Number(response.headers.get('retry-after'));
  return Number.isFinite(value) && value >= 0 ? value : undefined;
}

/** The error an answer that is not 2xx stands for. */
export async function errorOf(response: Response): Promise<OpspadError> {
  const text = await response.text().catch(() => '');
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  const error = (body as { error?: { code?: unknown; message?: unknown; details?: unknown } } | undefined)?.error;
  if (error && typeof error.code === 'string' && typeof error.message === 'string') {
    return new OpspadError(error.code as OpspadError['code'], error.message, {
      status: response.status,
      details:
        typeof error.details === 'object' && error.details !== null ? (error.details as Record<string, unknown>) : {},
      retryAfterSeconds: retryAfter(response),
    });
  }
  return new OpspadError('invalid_response', `HTTP ${response.status}: ${text.slice(0, 200) || response.statusText}`, {
    status: response.status,
    retryAfterSeconds: retryAfter(response),
  });
}

export interface Transport {
  /** A JSON call; resolves with the parsed body of a 2xx answer. */
  json<T>(call: Call): Promise<T>;
  /**
   * A streaming call: the 2xx response of `mediaType` (default: an event stream), its body
   * unread; no timeout once the headers arrive.
   */
  stream(call: Call, mediaType?: string): Promise<Response>;
}

export function createTransport(options: ClientOptions): Transport {
  const base = new URL(options.baseUrl.endsWith('/') ? options.baseUrl : `${options.baseUrl}/`);
  if (base.protocol !== 'http:' && base.protocol !== 'https:') {
    throw new TypeError(`baseUrl must be an http(s) URL (got ${options.baseUrl})`);
  }
  const doFetch = options.fetch ?? globalThis.fetch;
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;

  /**
   * Sends `call`; `read` consumes the answer. The timeout covers both (for a stream, `read` only
   * waits for the headers), and every failure that is not the caller's abort becomes an
   * OpspadError.
   */
  const send = async <T>(call: Call, accept: string, read: (response: Response) => Promise<T>): Promise<T> => {
    const url = new URL(`${call.path.replace(/^\//, '')}${queryString(call.query)}`, base);
    const timeout = new AbortController();
    const timer = setTimeout(() => timeout.abort(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
    const signal = call.signal ? AbortSignal.any([call.signal, timeout.signal]) : timeout.signal;
    const headers: Record<string, string> = {
      ...options.headers,
      ...call.headers,
      authorization: `Bearer ${options.apiKey}`,
      accept,
    };
    if (call.body !== undefined) {
      headers['content-type'] = 'application/json';
    }
    const where = `${call.method} ${url.pathname}`;
    try {
      const response = await doFetch(url, {
        method: call.method,
        headers,
        body: call.body === undefined ? undefined : JSON.stringify(call.body),
        signal,
      });
      if (!response.ok && !call.answers?.includes(response.status)) {
        throw await errorOf(response);
      }
      return await read(response);
    } catch (error) {
      if (error instanceof OpspadError) {
        throw error;
      }
      if (call.signal?.aborted) {
        throw call.signal.reason;
      }
      if (timeout.signal.aborted) {
        throw new OpspadError('timeout', `${where}: no answer within ${timeoutMs} ms`, { status: 0, cause: error });
      }
      throw new OpspadError('network_error', `${where}: ${(error as Error).message}`, { status: 0, cause: error });
    } finally {
      clearTimeout(timer);
    }
  };

  return {
    json: <T>(call: Call) =>
      send(call, 'application/json', async (response) => {
        const text = await response.text();
        try {
          return JSON.parse(text) as T;
        } catch (error) {
          throw new OpspadError('invalid_response', `HTTP ${response.status}: not JSON: ${text.slice(0, 200)}`, {
            status: response.status,
            cause: error,
          });
        }
      }),
    stream: (call, mediaType = 'text/event-stream') =>
      send(call, mediaType, async (response) => {
        if (!response.body || !String(response.headers.get('content-type')).startsWith(mediaType)) {
          await response.body?.cancel();
          throw new OpspadError('invalid_response', `HTTP ${response.status}: not ${mediaType}`, {
            status: response.status,
          });
        }
        return response;
      }),
  };
}
