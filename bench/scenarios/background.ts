/**
 * opspad end to end in one process: its own workers (the demo handler's no-op path: latency 0,
 * failure rate 0), its dispatcher, lanes, leases and records, exactly as `opspad start` runs
 * them, with the jobs in Redis or in Postgres (the run's database, BullMQ's schema beside
 * opspad's tables). Timed from the dispatch of the lanes to the operation's completion.
 */
import { randomUUID } from 'node:crypto';
import { loadConfig, type QueueBackendKind } from '../../src/config/env.ts';
import { createLogger } from '../../src/logger.ts';
import { createOpspad } from '../../src/main.ts';
import { createOperation } from '../../src/store/index.ts';
import { type BenchContext, itemIds, timed, waitFor } from '../lib/common.ts';
import { opspadLanes, RUNNER_PG_POOL_SIZE } from './opspad-settings.ts';

/**
 * opspad with its workers in this process; `run(batch)` → items/s over the plan's item count.
 * `clusterNodes`: the jobs in that Redis Cluster instead of the run's Redis.
 */
export async function backgroundRunner(
  ctx: BenchContext,
  organizationId: string,
  queue: QueueBackendKind = 'redis',
  clusterNodes?: readonly string[],
) {
  const prefix = `${ctx.prefix}-inproc${queue === 'redis' ? (clusterNodes ? '-cluster' : '') : '-pg'}`;
  const redis = clusterNodes ? { REDIS_CLUSTER_NODES: clusterNodes.join(',') } : { REDIS_URL: ctx.redisUrl };
  const config = loadConfig({
    DATABASE_URL: ctx.databaseUrl,
    ...(queue === 'redis' ? redis : { OPSPAD_QUEUE_BACKEND: 'postgres' }),
    OPSPAD_QUEUE_PREFIX: prefix,
    OPSPAD_LOG_LEVEL: 'warn',
    OPSPAD_PG_POOL_SIZE: String(RUNNER_PG_POOL_SIZE),
  });
  const opspad = await createOpspad({ config, logger: createLogger('warn', 'opspad-bench'), api: false });
  ctx.defer(() => opspad.close());

  const run = async (batch: number, items = ctx.plan.backgroundItems[batch] as number) => {
    const scope = { organizationId, conversationId: randomUUID() };
    const { operation } = await createOperation(ctx.db, scope, {
      operationType: 'demo',
      itemIds: itemIds(items),
      batchSize: batch,
      queryParams: { latency_ms: 0, failure_rate: 0 },
      notes: null,
      execution: 'background',
      queuePrefix: prefix,
      maxParallelBatches: opspadLanes(batch),
      actor: 'bench',
    });
    const { ms } = await timed(async () => {
      await opspad.dispatcher.startLanes(operation);
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
    return (items / ms) * 1000;
  };
  return { run, close: () => opspad.close() };
}
