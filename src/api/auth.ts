/**
 * Bearer authentication for `/v1` (API keys) and `/mcp` (API keys and OAuth access tokens). The
 * resolved organization is the only scope a request ever works in: handlers read it from
 * `res.locals.principal`, never from the body. A valid key passes whatever its address's failed
 * sign-ins; a wrong one past them is answered 429 (auth-failures.ts).
 */
import type { Request, RequestHandler, Response } from 'express';
import { AppError } from '../domain/errors.ts';
import { authenticateApiKey, type Database, type Principal } from '../store/index.ts';
import type { AuthFailureLimiter } from './auth-failures.ts';

export interface BearerOptions {
  failures?: AuthFailureLimiter;
  /**
   * OPSPAD_API_KEY_CACHE_TTL: how long a key found stays trusted without a lookup; a key revoked
   * by another process is refused within that long (store/tenants/api-key-cache.ts).
   */
  cacheTtlMs?: number;
  /** The `WWW-Authenticate` value of a 401 (`given`: a credential was sent and refused). */
  challenge?: (req: Request, given: boolean) => string;
  /** Another kind of token this surface accepts (OAuth access tokens on /mcp), or null. */
  verifyOther?: (token: string) => Promise<Principal | null>;
  /** What the 401 tells a caller who sent nothing. */
  missing?: string;
  /** What the 401 tells a caller whose credential was refused. */
  refused?: string;
}

export function requireBearer(db: Database, options: BearerOptions = {}): RequestHandler {
  const { failures } = options;
  return async (req, res, next) => {
    const header = req.get('authorization') ?? '';
    const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
    const token = match?.[1];
    const gate = token ? await failures?.beforeCheck('api', req, res, token) : undefined;
    const principal = token
      ? ((await authenticateApiKey(db, token, { cacheTtlMs: options.cacheTtlMs ?? 0 })) ??
        (await options.verifyOther?.(token)) ??
        null)
      : null;
    if (!principal) {
      if (token && gate) {
        await failures?.afterFailure('api', req, res, token, gate);
      }
      res.set('WWW-Authenticate', options.challenge?.(req, !!token) ?? 'Bearer realm="opspad"');
      throw new AppError(
        'unauthorized',
        match
          ? (options.refused ?? 'The API key is not valid or was revoked.')
          : (options.missing ?? 'Send an API key as "Authorization: Bearer <api_key>".'),
      );
    }
    res.locals.principal = principal;
    next();
  };
}

export function requireApiKey(db: Database, failures?: AuthFailureLimiter, cacheTtlMs = 0): RequestHandler {
  return requireBearer(db, { failures, cacheTtlMs });
}

export function principalOf(res: Response): Principal {
  return res.locals.principal as Principal;
}
