/**
 * `io_bound_efficiency`: how close one worker process gets to `in flight / latency` when the work
 * is waiting on a slow provider. The `demo` handler at latency_ms 100 (it waits once per batch,
 * as if the batch's items were called at once) with 2,000 items in flight: ideally 20,000 items/s.
 *
 * Items in flight in one process are its concurrency for the type (batches at once,
 * OPSPAD_DEMO_CONCURRENCY, default 16) times the batch size: 2,000 in flight is 16 batches of
 * 125, with the operation's max_parallel_batches at 16. What is lost against the ideal is the
 * lease, record and queue round trips between one batch and the next of a lane (each lane idles
 * through them). Reported beside it: the worker's peak RSS and its CPU time per item.
 */
import { BUILT_IN_CONCURRENCY } from '../../../src/handlers/built-in-concurrency.ts';
import { createDemoHandler } from '../../../src/handlers/demo.ts';
import {
  benchDispatcher,
  createBackgroundOperation,
  runToCompletion,
  runWatched,
  workerCostEntries,
} from '../../lib/background-operation.ts';
import { startOpspadChild } from '../../lib/child.ts';
import { type BenchContext, type Entry, round } from '../../lib/common.ts';

const LATENCY_MS = 100;
/** The demo handler's default batches at once (OPSPAD_DEMO_CONCURRENCY). */
const CONCURRENCY = BUILT_IN_CONCURRENCY.demo.concurrency;
const IN_FLIGHT = 2_000;
const BATCH = IN_FLIGHT / CONCURRENCY;
const IDEAL = (IN_FLIGHT / LATENCY_MS) * 1000;

export async function benchIoBound(ctx: BenchContext, organizationId: string): Promise<Entry[]> {
  const prefix = `${ctx.prefix}-io`;
  const worker = await startOpspadChild(ctx, 'worker', { OPSPAD_QUEUE_PREFIX: prefix });
  const dispatcher = await benchDispatcher(ctx, prefix, [createDemoHandler()]);
  const operation = (items: number) =>
    createBackgroundOperation(ctx, {
      organizationId,
      operationType: 'demo',
      items,
      batchSize: BATCH,
      queryParams: { latency_ms: LATENCY_MS, failure_rate: 0 },
      queuePrefix: prefix,
      maxParallelBatches: CONCURRENCY,
    });
  try {
    // Untimed: connections open, code compiled, statements planned.
    await runToCompletion(ctx, dispatcher, await operation(IN_FLIGHT * 2), 20);
    const items = ctx.plan.ioBoundItems;
    const run = await runWatched(ctx, dispatcher, await operation(items), worker.pid);
    const perSecond = items / run.seconds;
    ctx.log(
      `I/O-bound: ${items} items at ${LATENCY_MS} ms a batch of ${BATCH}, ${IN_FLIGHT} in flight: ${round(run.seconds, 2)} s, ${round(perSecond, 0)} items/s (${round(perSecond / IDEAL, 3)} of ${IDEAL}); worker CPU ${round(run.cpuSeconds, 2)} s, peak RSS ${round(run.peakRssMb, 0)} MB`,
    );
    const setting = `one opspad worker process, demo handler latency_ms ${LATENCY_MS}: ${CONCURRENCY} batches (OPSPAD_DEMO_CONCURRENCY) of ${BATCH} = ${IN_FLIGHT} items in flight`;
    return [
      {
        name: 'io_bound_items_per_s',
        value: Math.round(perSecond),
        unit: 'items/s',
        n: items,
        note: setting,
      },
      {
        name: 'io_bound_efficiency',
        value: round(perSecond / IDEAL, 3),
        unit: `of ${IDEAL.toLocaleString('en-US')} items/s`,
        n: items,
        note: `io_bound_items_per_s ÷ (${IN_FLIGHT} in flight / ${LATENCY_MS} ms)`,
      },
      ...workerCostEntries('io_bound', items, run, String(IN_FLIGHT)),
    ];
  } finally {
    await worker.stop();
  }
}
