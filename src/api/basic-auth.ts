/**
 * HTTP basic auth for the operator pages (Bull Board, metrics). Credentials are compared as
 * SHA-256 digests with timingSafeEqual, so neither their content nor their length leaks
 * through response timing. The right password passes whatever its address's failed sign-ins;
 * past them, the address's guesses are paced and a wrong one is answered 429 (auth-failures.ts).
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { RequestHandler } from 'express';
import { AppError, errorBody } from '../domain/errors.ts';
import type { AuthFailureLimiter } from './auth-failures.ts';

export interface AdminCredentials {
  user: string;
  password: string;
}

const digest = (value: string) => createHash('sha256').update(value, 'utf8').digest();

export function requireBasicAuth(
  credentials: AdminCredentials,
  { realm = 'opspad admin', failures }: { realm?: string; failures?: AuthFailureLimiter } = {},
): RequestHandler {
  const expected = digest(`${credentials.user}:${credentials.password}`);
  return async (req, res, next) => {
    const match = /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(req.get('authorization') ?? '');
    const given = match?.[1] ? Buffer.from(match[1], 'base64').toString('utf8') : '';
    if (given) {
      const gate = await failures?.beforeCheck('operator', req, res, given);
      if (timingSafeEqual(digest(given), expected)) {
        next();
        return;
      }
      if (gate) {
        await failures?.afterFailure('operator', req, res, given, gate);
      }
    }
    res.set('WWW-Authenticate', `Basic realm="${realm}", charset="UTF-8"`);
    res
      .status(401)
      .json(
        errorBody(
          new AppError(
            'unauthorized',
            'Sign in with the operator user and password (OPSPAD_ADMIN_USER, OPSPAD_ADMIN_PASSWORD).',
          ),
        ),
      );
  };
}
