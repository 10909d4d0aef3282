/**
 * How fast an operation goes and when it will be done, as the operator view shows it: the rate
 * over its recent batches (not its lifetime average, which a pause would skew), and the time the
 * items left would take at that rate.
 */

/** A window shorter than this gives a rate from one batch's burst: it counts as this long. */
const MIN_WINDOW_SECONDS = 1;

export interface Pace {
  /** Items recorded per second; null when nothing was recorded in the window. */
  perSecond: number | null;
  /** Seconds until the items left are recorded at that rate; null without a rate. */
  etaSeconds: number | null;
}

export function paceOf(recentItems: number, windowSeconds: number, remaining: number): Pace {
  if (recentItems <= 0 || !Number.isFinite(windowSeconds)) {
    return { perSecond: null, etaSeconds: null };
  }
  const perSecond = recentItems / Math.max(MIN_WINDOW_SECONDS, windowSeconds);
  return { perSecond, etaSeconds: remaining <= 0 ? 0 : remaining / perSecond };
}

/** "950/s", "12.5/s", "0.25/s", "3/min" (below one a second, per minute reads better). */
export function formatRate(perSecond: number): string {
  if (perSecond >= 100) {
    return `${Math.round(perSecond).toLocaleString('en-US')}/s`;
  }
  if (perSecond >= 1) {
    return `${Number(perSecond.toFixed(1))}/s`;
  }
  const perMinute = perSecond * 60;
  return perMinute >= 1 ? `${Number(perMinute.toFixed(1))}/min` : `${Number(perSecond.toFixed(3))}/s`;
}

/** "0s", "45s", "3m 05s", "2h 10m", "3d 4h": two units at most. */
export function formatDuration(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) {
    return `${s}s`;
  }
  if (s < 3600) {
    return `${Math.floor(s / 60)}m ${String(s % 60).padStart(2, '0')}s`;
  }
  if (s < 86_400) {
    return `${Math.floor(s / 3600)}h ${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
  }
  return `${Math.floor(s / 86_400)}d ${Math.floor((s % 86_400) / 3600)}h`;
}
