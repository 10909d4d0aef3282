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
 * no ledger. The receiver and the worker share the machine's cores, so the floor is the most
 * `webhook_efficiency` can be on the machine, and `webhook_items_per_s` is read against it.
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

/** The floor: the handler alone in its own process, warmed up first (webhook-floor-child.ts). */
async function runFloor(
  ctx: BenchContext,
  receiver: Forked,
  target: { url: string; host: string; secret: string; organizationId: string },
  items: number,
): Promise<{ seconds: number; cpuSeconds: number; stats: ReceiverStats }> {
  const floor = await forkChild(ctx, fileURLToPath(new URL('./webhook-floor-child.ts', import.meta.url)), {});
  try {
    const deliver = (count: number) =>
      floor.call<{ seconds: number; cpuSeconds: number }>('deliver', {
        ...target,
        items: count,
        inFlight: WANTED_IN_FLIGHT,
        operationId: randomUUID(),
      });
    await deliver(Math.max(WANTED_IN_FLIGHT, Math.round(items / 10)));
    await receiver.call('configure', { latencyMs: LATENCY_MS, secret: target.secret });
    const run = await deliver(items);
    const stats = await receiver.call<ReceiverStats>('stats');
    checkReceived(stats, items, 'the floor');
    return { ...run, stats };
  } finally {
    await floor.stop();
  }
}

export async function benchWebhook(ctx: BenchContext, organizationId: string): Promise<Entry[]> {
  const prefix = `${ctx.prefix}-webhook`;
  const receiver = await forkChild(ctx, fileURLToPath(new URL('./webhook-receiver-child.ts', import.meta.url)), {});
  const [secret] = await webhookSigningSecrets(ctx.db, organizationId);
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
  try {
    await runToCompletion(ctx, dispatcher, await operation(Math.max(40, Math.round(ctx.plan.webhookItems / 10))), 20);
    await receiver.call('configure', { latencyMs: LATENCY_MS, secret });
    const items = ctx.plan.webhookItems;
    const run = await runWatched(ctx, dispatcher, await operation(items), worker.pid);
    const stats = await receiver.call<ReceiverStats>('stats');
    checkReceived(stats, items, 'opspad');
    const perSecond = items / run.seconds;
    const receiverUs = (seconds: number) => round((seconds / items) * 1e6, 0);
    ctx.log(
      `webhook: ${items} items, receiver at ${LATENCY_MS} ms: ${round(run.seconds, 2)} s, ${round(perSecond, 0)} items/s (${round(perSecond / IDEAL, 4)} of ${IDEAL}); at most ${stats.peakInFlight} in flight; worker CPU ${round(run.cpuSeconds, 2)} s, peak RSS ${round(run.peakRssMb, 0)} MB; receiver ${receiverUs(stats.cpuSeconds)} µs of CPU a request`,
    );
    const floor = await runFloor(ctx, receiver, { url, host, secret, organizationId }, items);
    const floorPerSecond = items / floor.seconds;
    const floorUs = round((floor.cpuSeconds / items) * 1e6, 0);
    ctx.log(
      `webhook floor (the handler alone, ${WANTED_IN_FLIGHT} at once): ${round(floor.seconds, 2)} s, ${round(floorPerSecond, 0)} items/s (${round(floorPerSecond / IDEAL, 4)} of ${IDEAL}); its CPU ${floorUs} µs an item, the receiver's ${receiverUs(floor.stats.cpuSeconds)} µs a request`,
    );
    return [
      {
        name: 'webhook_floor_items_per_s',
        value: Math.round(floorPerSecond),
        unit: 'items/s',
        n: items,
        note: `the webhook handler alone in one process, ${WANTED_IN_FLIGHT} calls at once against the same receiver: signed, through the egress guard, no queue, no ledger; ${floorUs} µs of its CPU an item, the receiver's ${receiverUs(floor.stats.cpuSeconds)} µs a request`,
      },
      {
        name: 'webhook_floor_efficiency',
        value: round(floorPerSecond / IDEAL, 4),
        unit: `of ${IDEAL.toLocaleString('en-US')} items/s`,
        n: items,
        note: 'webhook_floor_items_per_s ÷ 25,000: the most webhook_efficiency can be on this machine',
      },
      {
        name: 'webhook_items_per_s',
        value: Math.round(perSecond),
        unit: 'items/s',
        n: items,
        baseline: 'webhook_floor_items_per_s',
        note: `one opspad worker process, built-in webhook handler at its default concurrency, ${LANES} lanes of ${BATCH} (${BUILT_IN_CONCURRENCY.webhook.itemConcurrency} requests at once each); the receiver saw at most ${stats.peakInFlight} in flight and verified every signature`,
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
    await worker.stop();
    await receiver.stop();
  }
}
