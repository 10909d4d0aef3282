/**
 * Where clients reach this API (OPSPAD_PUBLIC_URL), and the DNS-rebinding guard of `/mcp` and
 * the OAuth endpoints built on it. A page on another site can make a browser send requests to
 * an opspad on its network (a name that resolves to 127.0.0.1, or to an internal address): the
 * browser then sends that site's name as Host, and its origin as Origin. So a request is
 * served only when its Host is the public address's (or, without one, a loopback name or HOST
 * with the port it came in on), and its Origin, when sent, is the public origin or one of
 * OPSPAD_MCP_ALLOWED_ORIGINS. Refusals are 403 and change nothing.
 */
import type { Request, RequestHandler } from 'express';
import { AppError } from '../../domain/errors.ts';

export interface PublicAddressSettings {
  /** OPSPAD_PUBLIC_URL, when set. */
  publicUrl?: string;
  /** HOST: without a public URL, the API is reached at http://HOST:<port>. */
  host: string;
  /** OPSPAD_MCP_ALLOWED_ORIGINS */
  allowedOrigins: readonly string[];
}

const LOOPBACK_NAMES = ['localhost', '127.0.0.1', '[::1]'];

/** HOST as a URL writes it (an IPv6 address in brackets; a wildcard as loopback). */
export function hostForUrl(host: string): string {
  if (host.includes(':') && !host.startsWith('[')) {
    return `[${host}]`; // an IPv6 address
  }
  return host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host;
}

export interface PublicAddress {
  /** The origin clients use, without a final slash: `https://opspad.example.com`. */
  origin(req: Request): string;
  /** The URL of `/mcp`, the protected resource. */
  mcpUrl(req: Request): string;
  /** Refuses (403) a request whose Host or Origin is not this API's. */
  guard: RequestHandler;
}

export function publicAddress(settings: PublicAddressSettings): PublicAddress {
  const fixed = settings.publicUrl ? new URL(settings.publicUrl) : undefined;
  const origin = (req: Request) =>
    fixed ? fixed.origin : `http://${hostForUrl(settings.host)}:${req.socket.localPort ?? ''}`;
  const hostsOf = (req: Request): string[] => {
    if (fixed) {
      return [fixed.host];
    }
    const port = req.socket.localPort;
    return [...new Set([...LOOPBACK_NAMES, hostForUrl(settings.host)])].map((name) => `${name}:${port}`);
  };
  return {
    origin,
    mcpUrl: (req) => `${origin(req)}/mcp`,
    guard(req, _res, next) {
      const host = (req.get('host') ?? '').toLowerCase();
      if (!hostsOf(req).includes(host)) {
        throw new AppError(
          'forbidden',
          `This server answers as ${origin(req)}: the Host header "${host.slice(0, 200)}" is not its address. Set OPSPAD_PUBLIC_URL to the address clients use.`,
          { field: 'Host' },
        );
      }
      const sent = req.get('origin');
      const origins = fixed ? [fixed.origin] : hostsOf(req).map((name) => `http://${name}`);
      if (sent !== undefined && !origins.includes(sent) && !settings.allowedOrigins.includes(sent)) {
        throw new AppError(
          'forbidden',
          `Requests from pages of ${sent.slice(0, 200)} are refused: only ${origin(req)} and the origins in OPSPAD_MCP_ALLOWED_ORIGINS may call /mcp.`,
          { field: 'Origin' },
        );
      }
      next();
    },
  };
}
