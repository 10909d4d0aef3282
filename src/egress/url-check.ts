/**
 * What can be said about an outbound URL without DNS: the scheme, credentials, length, and, when
 * the host is an IP address literal, whether that address may be called. Used twice: when an
 * operation is created (a 400 that names the field) and again right before each request.
 *
 * The WHATWG URL parser normalises every odd IPv4 spelling first (`127.1`, `2130706433`,
 * `0x7f000001`, `0177.0.0.1`, `%31%32%37.0.0.1` all become `127.0.0.1`; `[::ffff:127.0.0.1]`
 * becomes `[::ffff:7f00:1]`), so what is classified is what a socket would connect to.
 */
import { isIP } from 'node:net';
import { BLOCKED_KIND_PHRASES, classifyAddress } from './address-class.ts';
import { type AllowList, normalizeHostname } from './allow-list.ts';

/** Longer URLs are refused: a tenant's URL is sent with every request and logged. */
export const MAX_URL_LENGTH = 2048;

export type UrlProblem = 'not_http' | 'credentials' | 'too_long' | 'address_not_allowed';

export interface CheckedUrl {
  ok: true;
  url: URL;
  /** Normalised: lower case, no brackets around IPv6, no trailing dot. */
  hostname: string;
  port: number;
  /** Set when the host is an IP address literal (no DNS will happen). */
  literalAddress: string | undefined;
}

export interface RefusedUrl {
  ok: false;
  problem: UrlProblem;
  /** Says what is wrong and what to do; never repeats credentials. */
  message: string;
}

/**
 * `localhost` and every name under it are this machine (RFC 6761), whatever DNS says: refused
 * like 127.0.0.1 without asking a resolver.
 */
export function isLocalhostName(hostname: string): boolean {
  return hostname === 'localhost' || hostname.endsWith('.localhost');
}

export function checkEgressUrl(raw: unknown, allow: AllowList): CheckedUrl | RefusedUrl {
  if (typeof raw === 'string' && raw.length > MAX_URL_LENGTH) {
    return { ok: false, problem: 'too_long', message: `must be at most ${MAX_URL_LENGTH} characters` };
  }
  let url: URL | undefined;
  if (typeof raw === 'string') {
    try {
      url = new URL(raw);
    } catch {
      url = undefined;
    }
  }
  if (url === undefined || (url.protocol !== 'http:' && url.protocol !== 'https:')) {
    return { ok: false, problem: 'not_http', message: 'must be an http(s) URL' };
  }
  if (url.username !== '' || url.password !== '') {
    return {
      ok: false,
      problem: 'credentials',
      message: 'must not contain a user name or password (user:password@…); remove them from the URL',
    };
  }
  const hostname = normalizeHostname(url.hostname);
  const port = url.port === '' ? (url.protocol === 'https:' ? 443 : 80) : Number(url.port);
  const literalAddress = isIP(hostname) === 0 ? undefined : hostname;
  if (literalAddress !== undefined) {
    const kind = classifyAddress(literalAddress);
    if (kind !== undefined && !allow.allows({ hostname, port, address: literalAddress })) {
      return {
        ok: false,
        problem: 'address_not_allowed',
        message: `names ${literalAddress}, ${BLOCKED_KIND_PHRASES[kind]}; only public addresses may be called (an operator can list exceptions in OPSPAD_WEBHOOK_ALLOW)`,
      };
    }
  }
  if (isLocalhostName(hostname) && !allow.allows({ hostname, port, address: '127.0.0.1' })) {
    return {
      ok: false,
      problem: 'address_not_allowed',
      message: `names ${hostname}, ${BLOCKED_KIND_PHRASES.loopback}; only public addresses may be called (an operator can list exceptions in OPSPAD_WEBHOOK_ALLOW)`,
    };
  }
  return { ok: true, url, hostname, port, literalAddress };
}
