/**
 * Rate limits count requests in fixed windows (src/api/window-counter.ts): requests that straddle
 * a window's end are counted in two windows, and a test that expects the (N+1)th to be refused
 * then sees it accepted. Such a test runs its requests through this helper, with API keys of
 * its own each time.
 */
import { windowAt } from '../../src/api/window-counter.ts';

/**
 * Runs `attempt`; when it fails and a window ended while it ran, runs it again in the new window
 * (at most three times). A failure inside one window is the test's failure, thrown at once.
 */
export async function inOneRateWindow<T>(windowMs: number, attempt: () => Promise<T>): Promise<T> {
  const window = { max: 1, windowMs };
  for (let run = 1; ; run++) {
    const before = windowAt(window, Date.now()).index;
    try {
      return await attempt();
    } catch (error) {
      if (run >= 3 || windowAt(window, Date.now()).index === before) {
        throw error;
      }
    }
  }
}
