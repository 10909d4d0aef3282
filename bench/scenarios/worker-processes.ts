/**
 * opspad end to end as users run it: two `opspad worker` processes of their own (the demo
 * handler's no-op path: latency 0, failure rate 0), their lanes dispatched from here, with the
 * jobs in Redis or in Postgres. Timed from the dispatch of the lanes to the operation's
 * completion, as the in-process figure (background.ts) is.
 */
import { randomUUID } from 'node:crypto';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { loadConfig, type QueueBackendKind } from '../../src/config/env.ts';
import { createDemoHandler } from '../../src/handlers/demo.ts';
import { createHandlerRegistry } from '../../src/handlers/registry.ts';
import type { Handler } from '../../src/handlers/types.ts';
import { createDispatcher } from '../../src/queue/dispatcher.ts';
import { migrateQueueBackend, openQueueBackend } from '../../src/queue/open-queue-backend.ts';
import { createOperation } from '../../src/store/index.ts';
import { type OpspadChild, startOpspadChild } from '../lib/child.ts';
import { type BenchContext, itemIds, timed, waitFor } from '../lib/common.ts';
import { DISPATCHER_PG_POOL_SIZE, opspadLanes, RUNNER_PG_POOL_SIZE } from './opspad-settings.ts';

export const WORKER_PROCESSES = 2;

/** The demo handler under limits that never bind (limited-demo.mjs), for what checking them costs. */
const LIMITED_DEMO = fileURLToPath(new URL('./limited-demo.mjs', import.meta.url));

/**
 * Two worker processes on `queue`; `run(batch)` → items/s over the plan's item count.
 * `limited`: the processes also run the demo handler under provider limits per key set too high
 * to bind, and `runLimited(batch)` sends the work there: the same processes, A against B.
 */
export async function workerProcessesRunner(
  ctx: BenchContext,
  organizationId: string,
  queue: QueueBackendKind,
  { limited = false } = {},
) {
  const prefix = `${ctx.prefix}-procs${queue === 'redis' ? '' : '-pg'}`;
  const config = loadConfig({
    DATABASE_URL: ctx.databaseUrl,
    ...(queue === 'redis' ? { REDIS_URL: ctx.redisUrl } : { OPSPAD_QUEUE_BACKEND: 'postgres' }),
    OPSPAD_QUEUE_PREFIX: prefix,
    OPSPAD_PG_POOL_SIZE: String(DISPATCHER_PG_POOL_SIZE),
  });
  await migrateQueueBackend(config, ctx.db);
  const backend = await openQueueBackend(config, ctx.db);
  const limitedDemo: Handler | undefined = limited
    ? ((await import(pathToFileURL(LIMITED_DEMO).href)) as { default: Handler }).default
    : undefined;
  const dispatcher = createDispatcher({
    backend,
    handlers: createHandlerRegistry([createDemoHandler(), ...(limitedDemo ? [limitedDemo] : [])]),
  });
  ctx.defer(async () => {
    await dispatcher.close();
    await backend.close();
  });
  const env = {
    OPSPAD_QUEUE_PREFIX: prefix,
    ...(queue === 'redis' ? {} : { OPSPAD_QUEUE_BACKEND: 'postgres' }),
    ...(limited ? { OPSPAD_HANDLERS: LIMITED_DEMO } : {}),
    OPSPAD_PG_POOL_SIZE: String(RUNNER_PG_POOL_SIZE),
  };
  const workers: OpspadChild[] = [];
  for (let i = 0; i < WORKER_PROCESSES; i++) {
    workers.push(await startOpspadChild(ctx, 'worker', env));
  }

  const runOn = async (
    operationType: string,
    batch: number,
    items = ctx.plan.backgroundItems[batch] as number,
  ): Promise<number> => {
    const scope = { organizationId, conversationId: randomUUID() };
    const { operation } = await createOperation(ctx.db, scope, {
      operationType,
      itemIds: itemIds(items),
      batchSize: batch,
      queryParams: { latency_ms: 0, failure_rate: 0 },
      notes: null,
      execution: 'background',
      queuePrefix: prefix,
      maxParallelBatches: opspadLanes(batch),
      actor: 'bench',
    });
    const label = `opspad_background_b${batch}${queue === 'redis' ? '' : '_pgqueue'}${operationType === 'demo' ? '' : '_limited'}`;
    await ctx.probe?.before(label);
    const { ms } = await timed(async () => {
      await dispatcher.startLanes(operation);
      await waitFor(
        `operation ${operation.id} to complete`,
        async () => {
          const rows = await ctx.db.query<{ status: string }>('SELECT status FROM assistant_operation WHERE id = $1', [
            operation.id,
          ]);
          return rows[0]?.status === 'completed' ? true : undefined;
        },
        { everyMs: 5 },
      );
    });
    await ctx.probe?.after(label, items);
    return (items / ms) * 1000;
  };
  return {
    run: (batch: number, items?: number) => runOn('demo', batch, items),
    runLimited: (batch: number, items?: number) => runOn(limitedDemo?.type ?? 'demo', batch, items),
    pids: workers.map((w) => w.pid),
    close: () => Promise.all(workers.map((w) => w.stop())),
  };
}
