/**
 * Failed sign-ins per client address: wrong API keys on /v1 and wrong operator passwords on the
 * operator pages. Past OPSPAD_AUTH_FAILURE_LIMIT failures in a window, an address's credentials
 * are refused with 429 and Retry-After *before* they are checked, so a flood of wrong keys costs
 * one counter read each and no database lookup, and a password cannot be guessed faster than the
 * limit. Only presented credentials count: a request without any (a browser asking for the
 * sign-in prompt) is answered 401 and costs nothing.
 *
 * The two surfaces count apart, so a broken API client on the operator's network does not lock
 * the operator out. The address is `req.ip`: the connection's, unless OPSPAD_TRUST_PROXY names
 * the proxies allowed to state it. Counts live with the queue backend (Redis, or a table of the
 * Postgres queue schema: shared by every API process); if they do not answer, sign-ins are
 * checked as usual, as the per-key limiter lets requests through.
 */
import type { Request, Response } from 'express';
import { AppError } from '../domain/errors.ts';
import type { Logger } from '../logger.ts';
import type { WindowCounter } from '../queue/backend.ts';
import { throttledWarning, type Window, windowAt } from './window-counter.ts';

export type AuthSurface = 'api' | 'operator';

export interface AuthFailureLimiter {
  /** Throws 429 (and sets Retry-After) when the request's address is over its failures. */
  refuseIfBlocked(surface: AuthSurface, req: Request, res: Response): Promise<void>;
  /** Counts one failed sign-in of the request's address. */
  recordFailure(surface: AuthSurface, req: Request): Promise<void>;
}

export function authFailureLimiter(counter: WindowCounter, limit: Window, logger: Logger): AuthFailureLimiter {
  const warn = throttledWarning((error) =>
    logger.warn({ err: error }, 'sign-in failure limiter unavailable; checking credentials without it'),
  );
  const keyOf = (surface: AuthSurface, req: Request) =>
    `authfail:${surface}:${req.ip ?? req.socket.remoteAddress ?? 'unknown'}`;
  return {
    async refuseIfBlocked(surface, req, res) {
      const { index, retryAfterSeconds } = windowAt(limit, Date.now());
      let failures: number;
      try {
        failures = await counter.read(keyOf(surface, req), index);
      } catch (error) {
        warn(error);
        return;
      }
      if (failures >= limit.max) {
        res.set('Retry-After', String(retryAfterSeconds));
        throw new AppError(
          'rate_limited',
          `Too many failed sign-ins from this address: at most ${limit.max} per ${limit.windowMs} ms (OPSPAD_AUTH_FAILURE_LIMIT). Check the credentials, then retry after ${retryAfterSeconds} s.`,
          { limit: limit.max, window_ms: limit.windowMs, retry_after_seconds: retryAfterSeconds },
        );
      }
    },
    async recordFailure(surface, req) {
      const { index } = windowAt(limit, Date.now());
      try {
        await counter.increment(keyOf(surface, req), index, limit.windowMs * 2);
      } catch (error) {
        warn(error);
      }
    },
  };
}
