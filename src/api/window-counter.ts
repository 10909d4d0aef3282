/**
 * Fixed-window counters in Redis, shared by every API process: the per-key request limit and the
 * per-address limit on failed sign-ins count with them. A key lives for two windows, so a counter
 * never outlives its use.
 */
import type { Redis } from 'ioredis';

export interface Window {
  max: number;
  windowMs: number;
}

/** The window `now` falls in, and the whole seconds until the next one starts (at least 1). */
export function windowAt(limit: Window, now: number): { index: number; retryAfterSeconds: number } {
  const index = Math.floor(now / limit.windowMs);
  return { index, retryAfterSeconds: Math.max(1, Math.ceil(((index + 1) * limit.windowMs - now) / 1000)) };
}

/** Adds one to the counter `key` of the current window; returns the new count. */
export async function countInWindow(redis: Redis, key: string, windowMs: number): Promise<number> {
  const results = await redis
    .multi()
    .incr(key)
    .pexpire(key, windowMs * 2)
    .exec();
  return Number(results?.[0]?.[1] ?? 0);
}

/** The counter `key` of the current window, without adding to it. */
export async function readWindow(redis: Redis, key: string): Promise<number> {
  return Number((await redis.get(key)) ?? 0);
}

/** Logs at most one warning a minute, so a Redis outage does not flood the log. */
export function throttledWarning(warn: (error: unknown) => void): (error: unknown) => void {
  let last = 0;
  return (error) => {
    const now = Date.now();
    if (now - last > 60_000) {
      last = now;
      warn(error);
    }
  };
}
