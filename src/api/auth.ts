/**
 * Bearer API-key authentication for `/v1`. The resolved organization is the only scope a
 * request ever works in: handlers read it from `res.locals.principal`, never from the body.
 * An address past its failed sign-ins is refused before its key is looked up (auth-failures.ts).
 */
import type { RequestHandler, Response } from 'express';
import { AppError } from '../domain/errors.ts';
import { authenticateApiKey, type Database, type Principal } from '../store/index.ts';
import type { AuthFailureLimiter } from './auth-failures.ts';

/**
 * `cacheTtlMs` (OPSPAD_API_KEY_CACHE_TTL): how long a key found stays trusted without a lookup;
 * a key revoked by another process is refused within that long (store/tenants/api-key-cache.ts).
 */
export function requireApiKey(db: Database, failures?: AuthFailureLimiter, cacheTtlMs = 0): RequestHandler {
  return async (req, res, next) => {
    const header = req.get('authorization') ?? '';
    const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
    const key = match?.[1];
    if (key) {
      await failures?.refuseIfBlocked('api', req, res);
    }
    const principal = key ? await authenticateApiKey(db, key, { cacheTtlMs }) : null;
    if (!principal) {
      if (key) {
        await failures?.recordFailure('api', req);
      }
      res.set('WWW-Authenticate', 'Bearer realm="opspad"');
      throw new AppError(
        'unauthorized',
        match ? 'The API key is not valid or was revoked.' : 'Send an API key as "Authorization: Bearer <api_key>".',
      );
    }
    res.locals.principal = principal;
    next();
  };
}

export function principalOf(res: Response): Principal {
  return res.locals.principal as Principal;
}
