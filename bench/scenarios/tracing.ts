/**
 * What traces cost a worker: the same background operation (demo handler, no latency, batch 100)
 * through a real `opspad worker` process without an OTLP endpoint, and with one (every batch's
 * job, lease, handler, record and next-step spans exported as OTLP/HTTP JSON to a sink on
 * loopback that reads and drops them). Runs alternate, so load on the machine falls on both
 * alike; the medians are compared.
 */
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { createDemoHandler } from '../../src/handlers/demo.ts';
import { createHandlerRegistry } from '../../src/handlers/registry.ts';
import { createDispatcher } from '../../src/queue/dispatcher.ts';
import { createRedisQueueBackend } from '../../src/queue/redis-backend.ts';
import { createOperation } from '../../src/store/index.ts';
import { startOpspadChild } from '../lib/child.ts';
import { type BenchContext, type Entry, itemIds, median, round, waitFor } from '../lib/common.ts';

const BATCH = 100;

export async function benchTracing(ctx: BenchContext, organizationId: string): Promise<Entry[]> {
  const items = Math.max(10_000, Math.round(ctx.plan.workerItems / 10));
  let exports = 0;
  let bytes = 0;
  const sink = createServer((req, res) => {
    req.on('data', (chunk: Buffer) => {
      bytes += chunk.length;
    });
    req.on('end', () => {
      exports += 1;
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  sink.listen(0, '127.0.0.1');
  await once(sink, 'listening');
  const endpoint = `http://127.0.0.1:${(sink.address() as AddressInfo).port}`;
  const backend = await createRedisQueueBackend({
    target: { kind: 'single', url: ctx.redisUrl },
    queuePrefix: ctx.prefix,
  });
  const dispatcher = createDispatcher({ backend, handlers: createHandlerRegistry([createDemoHandler()]) });

  const runOnce = async (traced: boolean): Promise<number> => {
    const worker = await startOpspadChild(
      ctx,
      'worker',
      traced ? { OTEL_EXPORTER_OTLP_ENDPOINT: endpoint, OTEL_BSP_SCHEDULE_DELAY: '1000' } : {},
    );
    try {
      const { operation } = await createOperation(
        ctx.db,
        { organizationId, conversationId: randomUUID() },
        {
          operationType: 'demo',
          itemIds: itemIds(items),
          batchSize: BATCH,
          queryParams: { latency_ms: 0, failure_rate: 0 },
          notes: null,
          execution: 'background',
          queuePrefix: ctx.prefix,
          actor: 'bench',
        },
      );
      const start = performance.now();
      await dispatcher.startLanes(operation);
      await waitFor(
        `the ${traced ? 'traced' : 'untraced'} worker to complete ${items} items`,
        async () => {
          const rows = await ctx.db.query<{ status: string }>('SELECT status FROM assistant_operation WHERE id = $1', [
            operation.id,
          ]);
          return rows[0]?.status === 'completed' ? true : undefined;
        },
        { everyMs: 50 },
      );
      return items / ((performance.now() - start) / 1000);
    } finally {
      await worker.stop(); // a traced worker exports what it still buffers
    }
  };

  const untraced: number[] = [];
  const traced: number[] = [];
  try {
    for (let i = 0; i < ctx.plan.repeats; i += 1) {
      untraced.push(await runOnce(false));
      traced.push(await runOnce(true));
    }
  } finally {
    await dispatcher.close();
    await backend.close();
    await new Promise<void>((resolve) => {
      sink.close(() => resolve());
      sink.closeAllConnections();
    });
  }
  const off = median(untraced);
  const on = median(traced);
  ctx.log(
    `tracing: ${round(off, 0)} items/s untraced, ${round(on, 0)} traced (${exports} exports, ${round(bytes / 2 ** 20, 1)} MiB of OTLP JSON)`,
  );
  return [
    {
      name: 'worker_untraced_items_per_s',
      value: Math.round(off),
      unit: 'items/s',
      n: items,
      note: `opspad worker process, batch ${BATCH}, no OTLP endpoint (median of ${untraced.length})`,
    },
    {
      name: 'worker_traced_items_per_s',
      value: Math.round(on),
      unit: 'items/s',
      n: items,
      baseline: 'worker_untraced_items_per_s',
      note: `the same, exporting every batch's spans over OTLP/HTTP to a local sink (median of ${traced.length})`,
    },
  ];
}
