/**
 * `webhook_efficiency`: the built-in `webhook` handler in one `opspad worker` process, against a
 * local receiver (a process of its own) that answers in 20 ms: every item signed in the Standard
 * Webhooks format with the organization's secret, every request through the egress guard (the
 * receiver's address allowed by OPSPAD_WEBHOOK_ALLOW), every signature verified by the receiver.
 * The figure is divided by what 500 items in flight would give at 20 ms: 25,000 items/s.
 *
 * What the settings allow today is far fewer in flight: `webhook` is an item handler, whose
 * batch's items run one after another (src/handlers/run-handler.ts), so one process has as many
 * items in flight as batches at once, its concurrency for the type, which the built-in handlers
 * fix in code at 4 (no setting changes it; a handler of one's own may set up to 1,000, but one
 * operation runs at most max_parallel_batches, 64, batches at once). The scenario runs what the
 * settings allow (the operation at 64 lanes) and reports the peak the receiver saw in flight.
 */
import { fileURLToPath } from 'node:url';
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
import { forkChild } from '../../lib/forked.ts';

const LATENCY_MS = 20;
const WANTED_IN_FLIGHT = 500;
const IDEAL = (WANTED_IN_FLIGHT / LATENCY_MS) * 1000;
/** The most batches one operation runs at once (src/domain/operation-input.ts). */
const LANES = 64;
const BATCH = 10;

interface ReceiverStats {
  requests: number;
  badSignatures: number;
  peakInFlight: number;
}

export async function benchWebhook(ctx: BenchContext, organizationId: string): Promise<Entry[]> {
  const prefix = `${ctx.prefix}-webhook`;
  const receiver = await forkChild(ctx, fileURLToPath(new URL('./webhook-receiver-child.ts', import.meta.url)), {});
  const [secret] = await webhookSigningSecrets(ctx.db, organizationId);
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
    if (stats.badSignatures > 0 || stats.requests < items) {
      throw new Error(
        `the receiver got ${stats.requests} requests for ${items} items, ${stats.badSignatures} with a bad signature`,
      );
    }
    const perSecond = items / run.seconds;
    ctx.log(
      `webhook: ${items} items, receiver at ${LATENCY_MS} ms: ${round(run.seconds, 2)} s, ${round(perSecond, 0)} items/s (${round(perSecond / IDEAL, 4)} of ${IDEAL}); at most ${stats.peakInFlight} in flight; worker CPU ${round(run.cpuSeconds, 2)} s, peak RSS ${round(run.peakRssMb, 0)} MB`,
    );
    return [
      {
        name: 'webhook_items_per_s',
        value: Math.round(perSecond),
        unit: 'items/s',
        n: items,
        note: `one opspad worker process, built-in webhook handler (concurrency 4, fixed in code), ${LANES} lanes of ${BATCH}; the receiver saw at most ${stats.peakInFlight} in flight and verified every signature`,
      },
      {
        name: 'webhook_efficiency',
        value: round(perSecond / IDEAL, 4),
        unit: `of ${IDEAL.toLocaleString('en-US')} items/s`,
        n: items,
        note: `webhook_items_per_s ÷ (${WANTED_IN_FLIGHT} in flight / ${LATENCY_MS} ms); ${stats.peakInFlight} in flight is what the settings allow (see bench/scenarios/shapes/webhook.ts)`,
      },
      ...workerCostEntries('webhook', items, run, String(stats.peakInFlight)),
    ];
  } finally {
    await worker.stop();
    await receiver.stop();
  }
}
