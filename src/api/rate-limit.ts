/**
 * Requests per API key, counted in fixed windows by the queue backend (Redis, or a table of the
 * Postgres one), so every API process shares one count. Over the limit: 429 with Retry-After.
 * If the counter does not answer, requests pass: losing the limiter must not take the API down
 * with it.
 */
import type { RequestHandler } from 'express';
import { AppError } from '../domain/errors.ts';
import type { Logger } from '../logger.ts';
import type { WindowCounter } from '../queue/backend.ts';
import { principalOf } from './auth.ts';
import { throttledWarning, type Window, windowAt } from './window-counter.ts';

export type RateLimit = Window;

export function rateLimitPerKey(counter: WindowCounter, limit: RateLimit, logger: Logger): RequestHandler {
  const warn = throttledWarning((error) =>
    logger.warn({ err: error }, 'rate limiter unavailable; letting requests through'),
  );
  return async (_req, res, next) => {
    const { keyId } = principalOf(res);
    const { index, retryAfterSeconds } = windowAt(limit, Date.now());
    let count: number;
    try {
      count = await counter.increment(`ratelimit:${keyId}`, index, limit.windowMs * 2);
    } catch (error) {
      warn(error);
      next();
      return;
    }
    res.set('RateLimit-Limit', String(limit.max));
    res.set('RateLimit-Remaining', String(Math.max(0, limit.max - count)));
    if (count > limit.max) {
      res.set('Retry-After', String(retryAfterSeconds));
      throw new AppError(
        'rate_limited',
        `Too many requests with this API key: at most ${limit.max} per ${limit.windowMs} ms (OPSPAD_RATE_LIMIT). Retry after ${retryAfterSeconds} s.`,
        { limit: limit.max, window_ms: limit.windowMs, retry_after_seconds: retryAfterSeconds },
      );
    }
    next();
  };
}

/**
 * Requests per client address (`req.ip`, as auth-failures.ts counts), for what anyone may call
 * without a credential and what makes opspad store something (OAuth client registrations).
 */
export function rateLimitPerAddress(
  counter: WindowCounter,
  limit: RateLimit,
  logger: Logger,
  what: { name: string; variable: string },
): RequestHandler {
  const warn = throttledWarning((error) =>
    logger.warn({ err: error }, `${what.name} limiter unavailable; letting requests through`),
  );
  return async (req, res, next) => {
    const { index, retryAfterSeconds } = windowAt(limit, Date.now());
    let count: number;
    try {
      count = await counter.increment(
        `${what.name}:${req.ip ?? req.socket.remoteAddress ?? 'unknown'}`,
        index,
        limit.windowMs * 2,
      );
    } catch (error) {
      warn(error);
      next();
      return;
    }
    if (count > limit.max) {
      res.set('Retry-After', String(retryAfterSeconds));
      throw new AppError(
        'rate_limited',
        `Too many ${what.name} requests from this address: at most ${limit.max} per ${limit.windowMs} ms (${what.variable}). Retry after ${retryAfterSeconds} s.`,
        { limit: limit.max, window_ms: limit.windowMs, retry_after_seconds: retryAfterSeconds },
      );
    }
    next();
  };
}
