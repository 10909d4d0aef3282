/**
 * Shared by the fair-share and batch-budget tests: worker settings that keep the reconciler out of
 * the way, a small batch budget, metric readings, a promise settled by hand, and a loopback
 * listener that accepts requests and never answers.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Metrics } from '../../src/metrics.ts';

/** A 2 s batch budget with a 300 ms grace. */
export const BUDGET = { OPSPAD_BATCH_TIMEOUT: '2s', OPSPAD_BATCH_GRACE: '300ms' };
/** No reconciler pass during a test; leases and locks long enough not to expire in one. */
export const QUIET = { OPSPAD_LEASE_TTL: '10s', OPSPAD_JOB_LOCK_TTL: '3s', OPSPAD_RECONCILE_INTERVAL: '1h' };

/** A metric's value for the given labels, summed over every registry given (0 when absent). */
export async function metricValue(
  registries: Metrics[],
  name: string,
  labels: Record<string, string>,
): Promise<number> {
  let total = 0;
  for (const metrics of registries) {
    const metric = metrics.registry.getSingleMetric(name);
    const values = metric ? (await metric.get()).values : [];
    for (const value of values) {
      if (Object.entries(labels).every(([key, wanted]) => String(value.labels[key]) === wanted)) {
        total += value.value;
      }
    }
  }
  return total;
}

/** A promise the test settles by hand. */
export function gate<T = void>() {
  let resolve: (value: T) => void = () => {};
  let reject: (error: Error) => void = () => {};
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** A loopback HTTP server that accepts every request and never answers. */
export async function silentListener(): Promise<{ url: string; requests: () => number; close(): Promise<void> }> {
  let requests = 0;
  const server: Server = createServer(() => {
    requests++; // …and never respond
  });
  server.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    requests: () => requests,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
