/**
 * opspad end to end in one process: its own workers (the demo handler's no-op path: latency 0,
 * failure rate 0), its dispatcher, lanes, leases and records, exactly as `opspad start` runs
 * them. Timed from the dispatch of the lanes to the operation's completion.
 */
import { randomUUID } from 'node:crypto';
import { loadConfig } from '../../src/config/env.ts';
import { createLogger } from '../../src/logger.ts';
import { createOpspad } from '../../src/main.ts';
import { createOperation } from '../../src/store/index.ts';
import { type BenchContext, type Entry, itemIds, median, round, timed, waitFor } from '../lib/common.ts';

export async function benchBackground(
  ctx: BenchContext,
  organizationId: string,
): Promise<{ entries: Entry[]; chart: Record<number, number> }> {
  const prefix = `${ctx.prefix}-inproc`;
  const config = loadConfig({
    DATABASE_URL: ctx.databaseUrl,
    REDIS_URL: ctx.redisUrl,
    OPSPAD_QUEUE_PREFIX: prefix,
    OPSPAD_LOG_LEVEL: 'warn',
  });
  const opspad = await createOpspad({ config, logger: createLogger('warn', 'opspad-bench'), api: false });
  ctx.defer(() => opspad.close());

  const runOnce = async (items: number, batch: number) => {
    const scope = { organizationId, conversationId: randomUUID() };
    const { operation } = await createOperation(ctx.db, scope, {
      operationType: 'demo',
      itemIds: itemIds(items),
      batchSize: batch,
      queryParams: { latency_ms: 0, failure_rate: 0 },
      notes: null,
      execution: 'background',
      queuePrefix: prefix,
      actor: 'bench',
    });
    const { ms } = await timed(async () => {
      await opspad.dispatcher.startLanes(operation);
      await waitFor(
        `operation ${operation.id} to complete`,
        async () => {
          const rows = await ctx.db.query<{ status: string; recorded: number }>(
            'SELECT status, completed_count + failed_count AS recorded FROM assistant_operation WHERE id = $1',
            [operation.id],
          );
          return rows[0]?.status === 'completed' ? rows[0] : undefined;
        },
        { everyMs: 5 },
      );
    });
    return (items / ms) * 1000;
  };

  const entries: Entry[] = [];
  const chart: Record<number, number> = {};
  try {
    for (const [batchText, items] of Object.entries(ctx.plan.backgroundItems).reverse()) {
      const batch = Number(batchText);
      const runs: number[] = [];
      for (let i = 0; i < ctx.plan.repeats; i++) {
        runs.push(await runOnce(items, batch));
      }
      chart[batch] = median(runs);
      entries.push({
        name: `opspad_background_b${batch}`,
        value: Math.round(median(runs)),
        unit: 'items/s',
        n: items,
        note: 'demo handler no-op, 1 process, 4 lanes',
      });
      ctx.log(`opspad background, batch ${batch}: ${round(median(runs), 0)} items/s`);
    }
  } finally {
    await opspad.close();
  }
  return { entries, chart };
}
