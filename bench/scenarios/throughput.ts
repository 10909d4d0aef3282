/**
 * Items/s by batch size: the SQL ceiling and opspad end to end with its jobs in Redis and, from
 * batch 100, in Postgres (BullMQ's PostgreSQL backend), measured in turns (ceiling, opspad on
 * Redis, opspad on Postgres, ceiling, …) so that whatever else the machine does weighs on all
 * alike.
 */
import { type BenchContext, type Entry, median, round } from '../lib/common.ts';
import { backgroundRunner } from './background.ts';
import { ceilingRunner } from './sql-ceiling.ts';

export async function benchThroughput(
  ctx: BenchContext,
  organizationId: string,
): Promise<{
  entries: Entry[];
  ceiling: Record<number, number>;
  opspad: Record<number, number>;
  opspadPgQueue: Record<number, number>;
}> {
  const ceilingRun = ceilingRunner(ctx, organizationId);
  const background = await backgroundRunner(ctx, organizationId);
  const pgQueue = await backgroundRunner(ctx, organizationId, 'postgres');
  const entries: Entry[] = [];
  const ceiling: Record<number, number> = {};
  const opspad: Record<number, number> = {};
  const opspadPgQueue: Record<number, number> = {};
  try {
    const batches = Object.keys(ctx.plan.ceilingItems)
      .map(Number)
      .sort((a, b) => b - a);
    for (const batch of batches) {
      const ceilingRuns: number[] = [];
      const opspadRuns: number[] = [];
      const pgQueueRuns: number[] = [];
      // Below 100 items a batch the queue's cost per job dominates, on either backend.
      const withPgQueue = batch >= 100;
      for (let i = 0; i < ctx.plan.repeats; i++) {
        ceilingRuns.push(await ceilingRun(batch));
        opspadRuns.push(await background.run(batch));
        if (withPgQueue) {
          pgQueueRuns.push(await pgQueue.run(batch));
        }
      }
      ceiling[batch] = median(ceilingRuns);
      opspad[batch] = median(opspadRuns);
      const list = (runs: number[]) => runs.map((r) => Math.round(r)).join(', ');
      ctx.log(
        `batch ${batch}: SQL ceiling ${list(ceilingRuns)} items/s; opspad ${list(opspadRuns)} items/s` +
          (withPgQueue ? `; opspad with the jobs in Postgres ${list(pgQueueRuns)} items/s` : ''),
      );
      entries.push(
        {
          name: `sql_ceiling_b${batch}`,
          value: Math.round(median(ceilingRuns)),
          unit: 'items/s',
          n: ctx.plan.ceilingItems[batch],
          note: '4 clients, lease + record SQL only',
        },
        {
          name: `opspad_background_b${batch}`,
          value: Math.round(median(opspadRuns)),
          unit: 'items/s',
          baseline: `sql_ceiling_b${batch}`,
          ratio: round(median(opspadRuns) / median(ceilingRuns), 3),
          n: ctx.plan.backgroundItems[batch],
          note: 'demo handler no-op, 1 process, 4 lanes',
        },
      );
      if (withPgQueue) {
        opspadPgQueue[batch] = median(pgQueueRuns);
        entries.push({
          name: `opspad_background_b${batch}_pgqueue`,
          value: Math.round(median(pgQueueRuns)),
          unit: 'items/s',
          baseline: `opspad_background_b${batch}`,
          ratio: round(median(pgQueueRuns) / median(opspadRuns), 3),
          n: ctx.plan.backgroundItems[batch],
          note: 'the same, jobs in Postgres (no Redis)',
        });
      }
    }
  } finally {
    await background.close();
    await pgQueue.close();
  }
  return { entries, ceiling, opspad, opspadPgQueue };
}
