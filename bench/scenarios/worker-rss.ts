/**
 * A real worker process (`opspad worker`, DATABASE_URL and REDIS_URL in its environment) through
 * a 100,000-item and then a 1,000,000-item background operation of the demo handler: items/s
 * of each (flat in N: the second at least 0.8× the first), and its RSS sampled from /proc from
 * start-up to the larger operation's completion.
 */
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { createDemoHandler } from '../../src/handlers/demo.ts';
import { createHandlerRegistry } from '../../src/handlers/registry.ts';
import { createDispatcher } from '../../src/queue/dispatcher.ts';
import { createRedisQueueBackend } from '../../src/queue/redis-backend.ts';
import { createOperation } from '../../src/store/index.ts';
import { startOpspadChild } from '../lib/child.ts';
import { type BenchContext, type Entry, itemIds, round, rssMb, sampleRss, waitFor } from '../lib/common.ts';

const BATCH = 1_000;

export async function benchWorkerRss(ctx: BenchContext, organizationId: string): Promise<Entry[]> {
  const items = ctx.plan.workerItems;
  const worker = await startOpspadChild(ctx, 'worker', { OPSPAD_LOG_LEVEL: 'info' });
  const rss = sampleRss(worker.pid, 50);
  const startedRss = rssMb(worker.pid);
  const backend = await createRedisQueueBackend({
    target: { kind: 'single', url: ctx.redisUrl },
    queuePrefix: ctx.prefix,
  });
  const dispatcher = createDispatcher({
    backend,
    handlers: createHandlerRegistry([createDemoHandler()]),
  });
  const through = async (count: number) => {
    const scope = { organizationId, conversationId: randomUUID() };
    const { operation } = await createOperation(ctx.db, scope, {
      operationType: 'demo',
      itemIds: itemIds(count),
      batchSize: BATCH,
      queryParams: { latency_ms: 0, failure_rate: 0 },
      notes: null,
      execution: 'background',
      queuePrefix: ctx.prefix,
      actor: 'bench',
    });
    const start = performance.now();
    await dispatcher.startLanes(operation);
    await waitFor(
      `the worker to complete ${count} items`,
      async () => {
        const rows = await ctx.db.query<{ status: string }>('SELECT status FROM assistant_operation WHERE id = $1', [
          operation.id,
        ]);
        return rows[0]?.status === 'completed' ? true : undefined;
      },
      { everyMs: 100 },
    );
    return (performance.now() - start) / 1000;
  };
  try {
    const smallItems = Math.min(100_000, Math.round(items / 10));
    const smallSeconds = await through(smallItems);
    const seconds = await through(items);
    const peak = Math.max(rss.stop(), rssMb(worker.pid, 'VmHWM'));
    ctx.log(
      `worker process through ${smallItems} items: ${round(smallSeconds, 1)} s (${round(smallItems / smallSeconds, 0)} items/s); through ${items} items: ${round(seconds, 1)} s (${round(items / seconds, 0)} items/s), RSS ${round(startedRss, 0)} MB at start, peak ${round(peak, 0)} MB (${rss.samples} samples)`,
    );
    return [
      {
        name: 'worker_peak_rss_mb',
        value: round(peak, 0),
        unit: 'MB',
        n: items,
        note: `opspad worker process, ${round(startedRss, 0)} MB at start, batch ${BATCH}`,
      },
      {
        name: 'worker_process_items_per_s_n100k',
        value: Math.round(smallItems / smallSeconds),
        unit: 'items/s',
        n: smallItems,
        note: 'a worker process of its own, batch 1,000, the smaller operation first',
      },
      {
        name: 'worker_process_items_per_s',
        value: Math.round(items / seconds),
        unit: 'items/s',
        baseline: 'worker_process_items_per_s_n100k',
        n: items,
        note: 'the same worker process, then the larger operation',
      },
    ];
  } finally {
    rss.stop();
    await dispatcher.close();
    await backend.close();
    await worker.stop();
  }
}
