/**
 * The egress guard: the one way opspad makes an HTTP request a tenant can aim (the webhook
 * handler today; any future handler through {@link EgressGuard.request}).
 *
 * The address is checked where the connection is made. Requests go through an undici agent whose
 * every connection gets a `lookup` of the guard's own: it resolves the name, drops every address
 * that is not public (unless `OPSPAD_WEBHOOK_ALLOW` lists it) and hands only the rest to the
 * socket. So the address checked is the address connected to: a name that resolved to a public
 * address a minute ago and to 10.0.0.1 now is refused now (DNS rebinding), and a name with both
 * kinds of answer only ever reaches its public ones. Host names that are IP literals skip DNS;
 * they are checked before the request (see url-check.ts). Proxy variables are not read: nothing
 * sits between the check and the connection.
 *
 * Responses: redirects are never followed (a 3xx is returned like any status, and its Location
 * is not read). The body is never returned: at most `maxDrainBytes` are read and discarded so a
 * keep-alive socket can be reused, then the socket is destroyed. `timeoutMs` bounds the whole
 * exchange, from lookup to the end of that drain.
 */

import type { LookupOptions } from 'node:dns';
import { lookup as dnsLookup } from 'node:dns/promises';
import type { LookupFunction } from 'node:net';
import { Agent, buildConnector, type Dispatcher } from 'undici';
import { classifyAddress } from './address-class.ts';
import { type AllowList, normalizeHostname, parseAllowList } from './allow-list.ts';
import { EgressError, toEgressError } from './egress-error.ts';
import { type CheckedUrl, checkEgressUrl, isLocalhostName, type RefusedUrl } from './url-check.ts';

export interface ResolvedAddress {
  address: string;
  family: 4 | 6;
}

/** Resolves a host name to every address it has. Injectable so tests never need real DNS. */
export type Resolver = (hostname: string) => Promise<readonly ResolvedAddress[]>;

/** The system resolver (getaddrinfo: /etc/hosts, then DNS), every address, in its order. */
export const systemResolver: Resolver = async (hostname) =>
  (await dnsLookup(hostname, { all: true, verbatim: true })).map(({ address, family }) => ({
    address,
    family: family === 6 ? 6 : 4,
  }));

export interface EgressGuardOptions {
  /** Exceptions (`OPSPAD_WEBHOOK_ALLOW` entries, or a parsed list). */
  allow?: AllowList | readonly string[];
  resolve?: Resolver;
  /** Response bytes read (and discarded) so the socket can be reused; default 64 KiB. */
  maxDrainBytes?: number;
}

export interface EgressRequestInit {
  method: 'POST' | 'PUT' | 'GET';
  headers: Readonly<Record<string, string>>;
  body?: Buffer;
  /** Budget for the whole exchange, lookup to the end of the drained response. */
  timeoutMs: number;
  /** Aborting rejects with the signal's reason, untouched. */
  signal?: AbortSignal;
}

/** Status and headers only: the body is never handed out (see the module header). */
export interface EgressResponse {
  status: number;
  headers: Readonly<Record<string, string | string[] | undefined>>;
}

/** The `lookup` option of `net.connect`: what it receives and answers. */
export type GuardedLookup = LookupFunction;

export interface EgressGuard {
  readonly allow: AllowList;
  /** Static checks, no DNS: scheme, credentials, length, a literal address. */
  checkUrl(raw: unknown): CheckedUrl | RefusedUrl;
  /** The connect-time lookup for a request to `hostname:port` (exposed for tests). */
  lookupFor(hostname: string, port: number): GuardedLookup;
  /**
   * Sends one request. Rejects with {@link EgressError} (a fixed phrase; `address_not_allowed`
   * when the guard refused, `invalid_url` when {@link checkUrl} would) or, when `init.signal`
   * fires, with the signal's reason.
   */
  request(url: string | URL, init: EgressRequestInit): Promise<EgressResponse>;
  /** Closes every socket; the guard sends nothing after (a process's shutdown). */
  close(): void;
}

const DEFAULT_DRAIN_BYTES = 64 * 1024;
/** Hosts (connectors) and URL verdicts kept at most; past that the cache starts over. */
const MAX_REMEMBERED = 1_000;

/** `map`'s value for `key`, made and kept on first use; a full map starts over. */
function remember<V>(map: Map<string, V>, key: string, make: () => V): V {
  let value = map.get(key);
  if (value === undefined) {
    if (map.size >= MAX_REMEMBERED) {
      map.clear();
    }
    value = make();
    map.set(key, value);
  }
  return value;
}

const LOCALHOST_ADDRESSES: readonly ResolvedAddress[] = [
  { address: '127.0.0.1', family: 4 },
  { address: '::1', family: 6 },
];

/**
 * Runs `stop` when `signal` aborts; returns what forgets it. One listener per signal, however
 * many requests wait on it: a batch's signal is shared by every request the batch has in flight.
 */
const waiting = new WeakMap<AbortSignal, Set<() => void>>();
function whenAborted(signal: AbortSignal, stop: () => void): () => void {
  let stops = waiting.get(signal);
  if (stops === undefined) {
    const created = new Set<() => void>();
    signal.addEventListener(
      'abort',
      () => {
        for (const each of [...created]) {
          each();
        }
        created.clear();
      },
      { once: true },
    );
    waiting.set(signal, created);
    stops = created;
  }
  stops.add(stop);
  const registered = stops;
  return () => registered.delete(stop);
}

function wantedFamily(family: LookupOptions['family']): 0 | 4 | 6 {
  if (family === 4 || family === 'IPv4') {
    return 4;
  }
  return family === 6 || family === 'IPv6' ? 6 : 0;
}

export function createEgressGuard(options: EgressGuardOptions = {}): EgressGuard {
  const allow = Array.isArray(options.allow)
    ? parseAllowList(options.allow)
    : ((options.allow as AllowList | undefined) ?? parseAllowList([]));
  const resolve = options.resolve ?? systemResolver;
  const maxDrainBytes = options.maxDrainBytes ?? DEFAULT_DRAIN_BYTES;

  const lookupFor =
    (urlHostname: string, port: number): GuardedLookup =>
    (hostname, lookupOptions, callback) => {
      const answer = isLocalhostName(normalizeHostname(hostname))
        ? Promise.resolve(LOCALHOST_ADDRESSES)
        : resolve(hostname);
      answer.then(
        (addresses) => {
          const family = wantedFamily(lookupOptions.family);
          const candidates = addresses.filter((a) => family === 0 || a.family === family);
          const usable = candidates.filter(
            (a) =>
              classifyAddress(a.address) === undefined ||
              allow.allows({ hostname: urlHostname, port, address: a.address }),
          );
          const first = usable[0];
          if (first === undefined) {
            const error =
              candidates.length === 0
                ? Object.assign(new Error(`no address for ${hostname}`), { code: 'ENOTFOUND' })
                : new EgressError('address_not_allowed');
            callback(error, '', 0);
          } else if (lookupOptions.all) {
            callback(
              null,
              usable.map((a) => ({ address: a.address, family: a.family })),
            );
          } else {
            callback(null, first.address, first.family);
          }
        },
        (error: unknown) => callback(error instanceof Error ? error : new Error(String(error)), '', 0),
      );
    };

  // One connector per host and port the URLs name: each connection it opens resolves through
  // the guard's lookup for that host and port, whatever the pool's reuse.
  const connectors = new Map<string, buildConnector.connector>();
  const connect: buildConnector.connector = (connectOptions, callback) => {
    const { hostname, protocol } = connectOptions;
    const port = Number(connectOptions.port) || (protocol === 'https:' ? 443 : 80);
    const connector = remember(connectors, `${hostname}:${port}`, () =>
      buildConnector({ lookup: lookupFor(normalizeHostname(hostname), port) }),
    );
    return connector(connectOptions, callback);
  };
  // Keep-alive sockets per origin, unref'd while idle, so they never keep a process alive.
  // Redirects are not followed: no redirect interceptor is composed in.
  // 15 s idle at most, whatever a receiver's Keep-Alive hint asks (undici would keep 10 minutes).
  const agent = new Agent({ connect, keepAliveTimeout: 15_000, keepAliveMaxTimeout: 15_000 });
  // The static check of each URL string, kept: the items of a batch share one URL.
  const checked = new Map<string, CheckedUrl | RefusedUrl>();
  const checkOnce = (url: string): CheckedUrl | RefusedUrl => remember(checked, url, () => checkEgressUrl(url, allow));

  async function request(url: string | URL, init: EgressRequestInit): Promise<EgressResponse> {
    const { signal } = init;
    signal?.throwIfAborted();
    // Checked here again, whoever checked before: a literal address never reaches the lookup.
    const target = checkOnce(String(url));
    if (!target.ok) {
      throw new EgressError(target.problem === 'address_not_allowed' ? 'address_not_allowed' : 'invalid_url');
    }
    // undici's dispatch with a handler of our own: no stream, no AbortController, no promise per
    // body, half the CPU of its request() (see the module header).
    return new Promise((resolve, reject) => {
      let controller: Dispatcher.DispatchController | undefined;
      let stopped: Error | undefined;
      let settled = false;
      let read = 0;
      const finish = () => {
        clearTimeout(timer);
        forget();
      };
      const settle = (error: unknown) => {
        if (!settled) {
          settled = true;
          reject(error);
        }
      };
      // The budget or the caller's abort: the caller hears now, the socket goes when undici
      // hands the request its controller (at once if it has).
      const stop = (reason: unknown) => {
        finish();
        settle(reason);
        // undici wants an Error; the caller already has the reason itself.
        stopped = reason instanceof Error ? reason : new Error('request stopped');
        controller?.abort(stopped);
      };
      const timer = setTimeout(() => stop(new EgressError('timeout')), init.timeoutMs);
      const forget = signal === undefined ? () => undefined : whenAborted(signal, () => stop(signal.reason));
      const handler: Dispatcher.DispatchHandler = {
        onRequestStart(started) {
          controller = started;
          if (stopped !== undefined) {
            started.abort(stopped);
          }
        },
        onResponseStart(_controller, statusCode, headers) {
          if (statusCode < 200) {
            // 100 Continue, 103 Early Hints: the answer is still to come.
            return;
          }
          settled = true;
          resolve({ status: statusCode, headers });
        },
        onResponseData(dataController, chunk) {
          read += chunk.length;
          if (read > maxDrainBytes) {
            // Larger answers are not downloaded: closing the socket is cheaper.
            finish();
            dataController.abort(new EgressError('bad_response'));
          }
        },
        onResponseEnd: finish,
        onResponseError(_controller, error) {
          finish();
          settle(toEgressError(error));
        },
      };
      // undici reports a request it cannot take through the handler, never by throwing.
      agent.dispatch(
        {
          origin: target.url.origin,
          path: `${target.url.pathname}${target.url.search}`,
          method: init.method,
          headers: init.headers,
          body: init.body ?? null,
        },
        handler,
      );
    });
  }

  return {
    allow,
    checkUrl: (raw) => checkEgressUrl(raw, allow),
    lookupFor,
    request,
    close() {
      agent.destroy().catch(() => undefined);
    },
  };
}
