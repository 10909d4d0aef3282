/**
 * The egress guard: the one way opspad makes an HTTP request a tenant can aim (the webhook
 * handler today; any future handler through {@link EgressGuard.request}).
 *
 * The address is checked where the connection is made. Requests go through `node:http(s)` with
 * a `lookup` of the guard's own: it resolves the name, drops every address that is not public
 * (unless `OPSPAD_WEBHOOK_ALLOW` lists it) and hands only the rest to the socket. So the address
 * checked is the address connected to: a name that resolved to a public address a minute ago
 * and to 10.0.0.1 now is refused now (DNS rebinding), and a name with both kinds of answer only
 * ever reaches its public ones. Host names that are IP literals skip DNS; they are checked
 * before the request (see url-check.ts). Proxy variables are not read: nothing sits between the
 * check and the connection.
 *
 * Responses: redirects are never followed (a 3xx is returned like any status, and its Location
 * is not read). The body is never returned: at most `maxDrainBytes` are read and discarded so a
 * keep-alive socket can be reused, then the socket is destroyed. `timeoutMs` bounds the whole
 * exchange, from lookup to the end of that drain.
 */

import type { LookupOptions } from 'node:dns';
import { lookup as dnsLookup } from 'node:dns/promises';
import { Agent as HttpAgent, request as httpRequest, type IncomingHttpHeaders, type IncomingMessage } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import type { LookupFunction } from 'node:net';
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
  headers: IncomingHttpHeaders;
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
  /** Closes idle keep-alive sockets. */
  close(): void;
}

const DEFAULT_DRAIN_BYTES = 64 * 1024;
const LOCALHOST_ADDRESSES: readonly ResolvedAddress[] = [
  { address: '127.0.0.1', family: 4 },
  { address: '::1', family: 6 },
];

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
  // Idle sockets are unref'd by the agent, so they never keep a process alive.
  const agents = {
    http: new HttpAgent({ keepAlive: true, timeout: 15_000 }),
    https: new HttpsAgent({ keepAlive: true, timeout: 15_000 }),
  };

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

  async function request(url: string | URL, init: EgressRequestInit): Promise<EgressResponse> {
    const { signal } = init;
    signal?.throwIfAborted();
    // Checked here again, whoever checked before: a literal address never reaches the lookup.
    const target = checkEgressUrl(String(url), allow);
    if (!target.ok) {
      throw new EgressError(target.problem === 'address_not_allowed' ? 'address_not_allowed' : 'invalid_url');
    }
    const isHttps = target.url.protocol === 'https:';
    const body = init.body ?? Buffer.alloc(0);
    return new Promise((resolvePromise, reject) => {
      let settled = false;
      let response: IncomingMessage | undefined;
      const cleanup = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
      };
      const fail = (error: unknown) => {
        cleanup();
        req.destroy();
        response?.destroy();
        if (!settled) {
          settled = true;
          reject(error);
        }
      };
      const onAbort = () => fail(signal?.reason);
      const timer = setTimeout(() => fail(new EgressError('timeout')), init.timeoutMs);
      signal?.addEventListener('abort', onAbort, { once: true });

      const req = (isHttps ? httpsRequest : httpRequest)({
        protocol: target.url.protocol,
        hostname: target.hostname,
        port: target.port,
        path: `${target.url.pathname}${target.url.search}`,
        method: init.method,
        headers: { ...init.headers, 'content-length': String(body.length) },
        agent: isHttps ? agents.https : agents.http,
        lookup: lookupFor(target.hostname, target.port),
      });
      req.on('error', (error) => fail(toEgressError(error)));
      req.on('response', (res) => {
        response = res;
        settled = true;
        resolvePromise({ status: res.statusCode ?? 0, headers: res.headers });
        let read = 0;
        res.on('data', (chunk: Buffer) => {
          read += chunk.length;
          if (read > maxDrainBytes) {
            // Larger answers are not downloaded: closing the socket is cheaper.
            res.destroy();
          }
        });
        res.on('error', () => undefined);
        res.on('close', cleanup);
      });
      req.end(body);
    });
  }

  return {
    allow,
    checkUrl: (raw) => checkEgressUrl(raw, allow),
    lookupFor,
    request,
    close() {
      agents.http.destroy();
      agents.https.destroy();
    },
  };
}
