/**
 * Items/s by batch size: the SQL ceiling and opspad end to end, measured in turns (ceiling,
 * opspad, ceiling, opspad, …) so that whatever else the machine does weighs on both alike.
 */
import { type BenchContext, type Entry, median, round } from '../lib/common.ts';
import { backgroundRunner } from './background.ts';
import { ceilingRunner } from './sql-ceiling.ts';

export async function benchThroughput(
  ctx: BenchContext,
  organizationId: string,
): Promise<{ entries: Entry[]; ceiling: Record<number, number>; opspad: Record<number, number> }> {
  const ceilingRun = ceilingRunner(ctx, organizationId);
  const background = await backgroundRunner(ctx, organizationId);
  const entries: Entry[] = [];
  const ceiling: Record<number, number> = {};
  const opspad: Record<number, number> = {};
  try {
    const batches = Object.keys(ctx.plan.ceilingItems)
      .map(Number)
      .sort((a, b) => b - a);
    for (const batch of batches) {
      const ceilingRuns: number[] = [];
      const opspadRuns: number[] = [];
      for (let i = 0; i < ctx.plan.repeats; i++) {
        ceilingRuns.push(await ceilingRun(batch));
        opspadRuns.push(await background.run(batch));
      }
      ceiling[batch] = median(ceilingRuns);
      opspad[batch] = median(opspadRuns);
      ctx.log(
        `batch ${batch}: SQL ceiling ${ceilingRuns.map((r) => Math.round(r)).join(', ')} items/s; opspad ${opspadRuns.map((r) => Math.round(r)).join(', ')} items/s`,
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
    }
  } finally {
    await background.close();
  }
  return { entries, ceiling, opspad };
}
