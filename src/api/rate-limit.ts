/**
 * Requests per API key, counted in Redis (fixed windows), so every API process shares one count.
 * Over the limit: 429 with Retry-After. If Redis does not answer, requests pass: losing the
 * limiter must not take the API down with it.
 */
import type { RequestHandler } from 'express';
import type { Redis } from 'ioredis';
import { AppError } from '../domain/errors.ts';
import type { Logger } from '../logger.ts';
import { principalOf } from './auth.ts';

export interface RateLimit {
  max: number;
  windowMs: number;
}

export function rateLimitPerKey(redis: Redis, prefix: string, limit: RateLimit, logger: Logger): RequestHandler {
  let lastWarning = 0;
  return async (_req, res, next) => {
    const { keyId } = principalOf(res);
    const now = Date.now();
    const window = Math.floor(now / limit.windowMs);
    const key = `${prefix}:ratelimit:${keyId}:${window}`;
    let count: number;
    try {
      const results = await redis
        .multi()
        .incr(key)
        .pexpire(key, limit.windowMs * 2)
        .exec();
      count = Number(results?.[0]?.[1] ?? 0);
    } catch (error) {
      if (now - lastWarning > 60_000) {
        lastWarning = now;
        logger.warn({ err: error }, 'rate limiter unavailable; letting requests through');
      }
      next();
      return;
    }
    res.set('RateLimit-Limit', String(limit.max));
    res.set('RateLimit-Remaining', String(Math.max(0, limit.max - count)));
    if (count > limit.max) {
      const retryAfter = Math.max(1, Math.ceil(((window + 1) * limit.windowMs - now) / 1000));
      res.set('Retry-After', String(retryAfter));
      throw new AppError(
        'rate_limited',
        `Too many requests with this API key: at most ${limit.max} per ${limit.windowMs} ms (OPSPAD_RATE_LIMIT). Retry after ${retryAfter} s.`,
        { limit: limit.max, window_ms: limit.windowMs, retry_after_seconds: retryAfter },
      );
    }
    next();
  };
}
