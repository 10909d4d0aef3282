/**
 * The child of healthz-probe.ts: asks `/healthz` of the URL in argv, one request after another,
 * from the moment it is told 'start' until it is told 'stop', then sends back every answer's
 * time in milliseconds and exits.
 */
import { performance } from 'node:perf_hooks';
import { Pool } from 'undici';

const url = process.argv[2] as string;
const pool = new Pool(url, { connections: 1, keepAliveTimeout: 60_000 });
let probing = false;
const latencies: number[] = [];

async function probe(): Promise<void> {
  while (probing) {
    const asked = performance.now();
    const health = await pool.request({ method: 'GET', path: '/healthz' });
    await health.body.text();
    latencies.push(performance.now() - asked);
  }
}

let loop: Promise<void> = Promise.resolve();
process.on('message', (message: unknown) => {
  if (message === 'start') {
    probing = true;
    loop = probe();
    process.send?.('started');
  } else if (message === 'stop') {
    probing = false;
    void loop.then(async () => {
      await pool.close();
      process.send?.({ latencies }, () => process.exit(0));
    });
  }
});
process.send?.('ready');
