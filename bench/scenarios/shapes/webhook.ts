/**
 * `webhook_efficiency`: the built-in `webhook` handler in one `opspad worker` process, against a
 * local receiver (a process of its own) that answers in 20 ms: every item signed in the Standard
 * Webhooks format with the organization's secret, every request through the egress guard (the
 * receiver's address allowed by OPSPAD_WEBHOOK_ALLOW), every signature verified by the receiver.
 * The figure is divided by what 500 items in flight would give at 20 ms: 25,000 items/s.
 *
 * Requests in flight in one process are its batches at once (OPSPAD_WEBHOOK_CONCURRENCY, default
 * 16) times the requests one batch has in flight (OPSPAD_WEBHOOK_ITEM_CONCURRENCY, default 32):
 * 512 with the defaults. The operation runs that many lanes, each batch four times the requests
 * it has in flight, so a batch's last few requests leave few lanes idle. The receiver reports the
 * peak it saw in flight.
 *
 * The floor (`webhook_floor_*`, webhook-floor-child.ts) is the same handler alone in a process of
 * its own, 500 calls at once against the same receiver: signing and the egress guard, no queue and
 * no ledger, measured before and after the worker's run. It does the part of the worker's work
 * that is the provider's call in the same kind of process, so `webhook_items_per_s` is read
 * against it: what is left between them is the queue and the ledger.
 */
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { BUILT_IN_CONCURRENCY } from '../../../src/handlers/built-in-concurrency.ts';
import { createWebhookHandler } from '../../../src/handlers/webhook.ts';
import { webhookSigningSecrets } from '../../../src/store/index.ts';
import {
  benchDispatcher,
  createBackgroundOperation,
  runToCompletion,
  runWatched,
  workerCostEntries,
} from '../../lib/background-operation.ts';
import { startOpspadChild } from '../../lib/child.ts';
import { type BenchContext, type Entry, round } from '../../lib/common.ts';
import { type Forked, forkChild } from '../../lib/forked.ts';

const LATENCY_MS = 20;
const WANTED_IN_FLIGHT = 500;
const IDEAL = (WANTED_IN_FLIGHT / LATENCY_MS) * 1000;
/** The webhook handler's default batches at once, and requests in flight per batch. */
const LANES = BUILT_IN_CONCURRENCY.webhook.concurrency;
const BATCH = 4 * BUILT_IN_CONCURRENCY.webhook.itemConcurrency;

interface ReceiverStats {
  requests: number;
  badSignatures: number;
  peakInFlight: number;
  cpuSeconds: number;
}

/** The receiver's count since it was configured: every request, every signature good. */
function checkReceived(stats: ReceiverStats, items: number, who: string): void {
  if (stats.badSignatures > 0 || stats.requests < items) {
    throw new Error(
      `${who}: the receiver got ${stats.requests} requests for ${items} items, ${stats.badSignatures} with a bad signature`,
    );
  }
}

interface FloorRun {
  seconds: number;
  cpuSeconds: number;
  stats: ReceiverStats;
}

/**
 * The floor's process (webhook-floor-child.ts), warmed up once: each `measure` delivers `items`
 * webhooks 500 at once and reads what the receiver counted meanwhile.
 */
async function startFloor(
  ctx: BenchContext,
  receiver: Forked,
  target: { url: string; host: string; secrets: readonly string[]; organizationId: string },
  items: number,
): Promise<{ measure(): Promise<FloorRun>; stop(): Promise<void> }> {
  const floor = await forkChild(ctx, fileURLToPath(new URL('./webhook-floor-child.ts', import.meta.url)), {});
  const deliver = (count: number) =>
    floor.call<{ seconds: number; cpuSeconds: number }>('deliver', {
      ...target,
      items: count,
      inFlight: WANTED_IN_FLIGHT,
      operationId: randomUUID(),
    });
  try {
    await deliver(Math.max(WANTED_IN_FLIGHT, Math.round(items / 10)));
  } catch (error) {
    await floor.stop();
    throw error;
  }
  return {
    async measure() {
      await receiver.call('configure', { latencyMs: LATENCY_MS, secret: target.secrets[0] });
      const run = await deliver(items);
      const stats = await receiver.call<ReceiverStats>('stats');
      checkReceived(stats, items, 'the floor');
      return { ...run, stats };
    },
    stop: () => floor.stop(),
  };
}

/** CPU microseconds a request of the receiver's, or an item of a sender's. */
const microsEach = (cpuSeconds: number, count: number) => round((cpuSeconds / count) * 1e6, 0);

export async function benchWebhook(ctx: BenchContext, organizationId: string): Promise<Entry[]> {
  const prefix = `${ctx.prefix}-webhook`;
  const receiver = await forkChild(ctx, fileURLToPath(new URL('./webhook-receiver-child.ts', import.meta.url)), {});
  const secrets = await webhookSigningSecrets(ctx.db, organizationId);
  const [secret] = secrets;
  if (secret === undefined) {
    throw new Error(`organization ${organizationId} has no webhook signing secret`);
  }
  const { url, host } = await receiver.call<{ url: string; host: string }>('configure', {
    latencyMs: LATENCY_MS,
    secret,
  });
  const worker = await startOpspadChild(ctx, 'worker', { OPSPAD_QUEUE_PREFIX: prefix, OPSPAD_WEBHOOK_ALLOW: host });
  const dispatcher = await benchDispatcher(ctx, prefix, [
    createWebhookHandler({ signingSecrets: (org) => webhookSigningSecrets(ctx.db, org) }),
  ]);
  const operation = (items: number) =>
    createBackgroundOperation(ctx, {
      organizationId,
      operationType: 'webhook',
      items,
      batchSize: BATCH,
      queryParams: { url, payload: { template: 'bench' } },
      queuePrefix: prefix,
      maxParallelBatches: LANES,
    });
  const items = ctx.plan.webhookItems;
  let floor: Awaited<ReturnType<typeof startFloor>> | undefined;
  try {
    await runToCompletion(ctx, dispatcher, await operation(Math.max(40, Math.round(items / 10))), 20);
    floor = await startFloor(ctx, receiver, { url, host, secrets, organizationId }, items);
    // The floor before and after the worker's run, so both see the machine of that minute.
    const before = await floor.measure();
    await receiver.call('configure', { latencyMs: LATENCY_MS, secret });
    const run = await runWatched(ctx, dispatcher, await operation(items), worker.pid);
    const stats = await receiver.call<ReceiverStats>('stats');
    checkReceived(stats, items, 'opspad');
    const after = await floor.measure();

    const perSecond = items / run.seconds;
    ctx.log(
      `webhook: ${items} items, receiver at ${LATENCY_MS} ms: ${round(run.seconds, 2)} s, ${round(perSecond, 0)} items/s (${round(perSecond / IDEAL, 4)} of ${IDEAL}); at most ${stats.peakInFlight} in flight; worker CPU ${round(run.cpuSeconds, 2)} s, peak RSS ${round(run.peakRssMb, 0)} MB; receiver ${microsEach(stats.cpuSeconds, stats.requests)} µs of CPU a request`,
    );
    const floorRate = (f: FloorRun) => {
      const floorPerSecond = items / f.seconds;
      ctx.log(
        `webhook floor (the handler alone, ${WANTED_IN_FLIGHT} at once): ${round(f.seconds, 2)} s, ${round(floorPerSecond, 0)} items/s (${round(floorPerSecond / IDEAL, 4)} of ${IDEAL}); at most ${f.stats.peakInFlight} in flight; its CPU ${microsEach(f.cpuSeconds, items)} µs an item, the receiver's ${microsEach(f.stats.cpuSeconds, f.stats.requests)} µs a request`,
      );
      return floorPerSecond;
    };
    const floors = [floorRate(before), floorRate(after)];
    const floorPerSecond = floors.reduce((sum, f) => sum + f, 0) / floors.length;
    const floorUs = microsEach(before.cpuSeconds + after.cpuSeconds, 2 * items);
    const floorReceiverUs = microsEach(
      before.stats.cpuSeconds + after.stats.cpuSeconds,
      before.stats.requests + after.stats.requests,
    );
    return [
      {
        name: 'webhook_floor_items_per_s',
        value: Math.round(floorPerSecond),
        unit: 'items/s',
        n: items,
        note: `the webhook handler alone in one process, ${WANTED_IN_FLIGHT} calls at once against the same receiver: signed, through the egress guard, no queue, no ledger; the mean of a run before the worker's and one after (${floors.map((f) => Math.round(f).toLocaleString('en-US')).join(' and ')}); ${floorUs} µs of its CPU an item, the receiver's ${floorReceiverUs} µs a request`,
      },
      {
        name: 'webhook_floor_efficiency',
        value: round(floorPerSecond / IDEAL, 4),
        unit: `of ${IDEAL.toLocaleString('en-US')} items/s`,
        n: items,
        note: `webhook_floor_items_per_s ÷ (${WANTED_IN_FLIGHT} in flight / ${LATENCY_MS} ms): what one process with the handler and no ledger reached on this machine's cores`,
      },
      {
        name: 'webhook_items_per_s',
        value: Math.round(perSecond),
        unit: 'items/s',
        n: items,
        baseline: 'webhook_floor_items_per_s',
        note: `one opspad worker process, built-in webhook handler at its default concurrency, ${LANES} lanes of ${BATCH} (${BUILT_IN_CONCURRENCY.webhook.itemConcurrency} requests at once each); the receiver saw at most ${stats.peakInFlight} in flight, verified every signature and spent ${microsEach(stats.cpuSeconds, stats.requests)} µs of CPU a request`,
      },
      {
        name: 'webhook_efficiency',
        value: round(perSecond / IDEAL, 4),
        unit: `of ${IDEAL.toLocaleString('en-US')} items/s`,
        n: items,
        note: `webhook_items_per_s ÷ (${WANTED_IN_FLIGHT} in flight / ${LATENCY_MS} ms); the receiver saw at most ${stats.peakInFlight} in flight`,
      },
      ...workerCostEntries('webhook', items, run, String(stats.peakInFlight)),
    ];
  } finally {
    await floor?.stop();
    await worker.stop();
    await receiver.stop();
  }
}
