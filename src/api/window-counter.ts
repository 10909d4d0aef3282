/**
 * Fixed windows for the counters the queue backend keeps for every API process (queue/backend.ts
 * `WindowCounter`): the per-key request limit and the per-address limit on failed sign-ins count
 * in them. A counter lives for two windows, so it never outlives its use.
 */

export interface Window {
  max: number;
  windowMs: number;
}

/** The window `now` falls in, and the whole seconds until the next one starts (at least 1). */
export function windowAt(limit: Window, now: number): { index: number; retryAfterSeconds: number } {
  const index = Math.floor(now / limit.windowMs);
  return { index, retryAfterSeconds: Math.max(1, Math.ceil(((index + 1) * limit.windowMs - now) / 1000)) };
}

/** Logs at most one warning a minute, so an outage of the counters' store does not flood the log. */
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
