/**
 * HTTP basic auth for the operator pages (Bull Board, metrics). Credentials are compared as
 * SHA-256 digests with timingSafeEqual, so neither their content nor their length leaks
 * through response timing.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { RequestHandler } from 'express';
import { AppError, errorBody } from '../domain/errors.ts';

export interface AdminCredentials {
  user: string;
  password: string;
}

const digest = (value: string) => createHash('sha256').update(value, 'utf8').digest();

export function requireBasicAuth(credentials: AdminCredentials, realm = 'opspad admin'): RequestHandler {
  const expected = digest(`${credentials.user}:${credentials.password}`);
  return (req, res, next) => {
    const match = /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(req.get('authorization') ?? '');
    const given = match?.[1] ? Buffer.from(match[1], 'base64').toString('utf8') : '';
    if (given && timingSafeEqual(digest(given), expected)) {
      next();
      return;
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
