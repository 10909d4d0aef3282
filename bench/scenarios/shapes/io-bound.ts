/**
 * `io_bound_efficiency`: how close one worker process gets to `in flight / latency` when the work
 * is waiting on a slow provider. The `demo` handler at latency_ms 100 (it waits once per batch,
 * as if the batch's items were called at once) with 2,000 items in flight: ideally 20,000 items/s.
 *
 * Items in flight in one process are its concurrency for the type (batches at once) times the
 * batch size. The built-in handlers' concurrency is fixed in code (4: no setting changes it), so
 * 2,000 in flight is 4 batches of 500, with the operation's max_parallel_batches at its default of
 * 4. What is lost against the ideal is the lease, record and queue round trips between one batch
 * and the next of a lane (each lane idles through them). Reported beside it: the worker's peak RSS
 * and its CPU time per item.
 */
import { createDemoHandler } from '../../../src/handlers/demo.ts';
import {
  benchDispatcher,
  cpuSeconds,
  createBackgroundOperation,
  runToCompletion,
} from '../../lib/background-operation.ts';
import { startOpspadChild } from '../../lib/child.ts';
import { type BenchContext, type Entry, round, rssMb, sampleRss } from '../../lib/common.ts';

const LATENCY_MS = 100;
/** The built-in handlers' concurrency (src/handlers/registry.ts HANDLER_DEFAULTS). */
const CONCURRENCY = 4;
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
    const measured = await operation(items);
    const rss = sampleRss(worker.pid, 50);
    const cpuBefore = cpuSeconds(worker.pid);
    const seconds = await runToCompletion(ctx, dispatcher, measured, 10);
    const cpu = cpuSeconds(worker.pid) - cpuBefore;
    const peak = Math.max(rss.stop(), rssMb(worker.pid, 'VmHWM'));
    const perSecond = items / seconds;
    ctx.log(
      `I/O-bound: ${items} items at ${LATENCY_MS} ms a batch of ${BATCH}, ${IN_FLIGHT} in flight: ${round(seconds, 2)} s, ${round(perSecond, 0)} items/s (${round(perSecond / IDEAL, 3)} of ${IDEAL}); worker CPU ${round(cpu, 2)} s, peak RSS ${round(peak, 0)} MB`,
    );
    const setting = `one opspad worker process, demo handler latency_ms ${LATENCY_MS}: ${CONCURRENCY} batches (its concurrency) of ${BATCH} = ${IN_FLIGHT} items in flight`;
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
      {
        name: 'io_bound_worker_peak_rss_mb',
        value: round(peak, 0),
        unit: 'MB',
        n: items,
        note: `the worker process, ${IN_FLIGHT} items in flight`,
      },
      {
        name: 'io_bound_cpu_us_per_item',
        value: round((cpu / items) * 1e6, 1),
        unit: 'µs',
        n: items,
        note: `the worker process's user + system CPU over the run, per item (${round(cpu, 2)} s in all)`,
      },
    ];
  } finally {
    await worker.stop();
  }
}
