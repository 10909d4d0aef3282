/**
 * Items/s by batch size, measured in turns (the minimal SQL, the same SQL on opspad's tables,
 * opspad with two worker processes, opspad in one process, then from batch 100 the worker
 * processes with the jobs in Postgres and opspad in one process on a Redis Cluster of three
 * masters started for the run, and round again) so that whatever else the machine does weighs
 * on all alike, after one untimed round of each.
 *
 * `opspad_background_*` is what users run: two `opspad worker` processes. `opspad_inprocess_*`
 * (workers inside the bench's own process, as an embedder runs them) is the second line.
 */
import { startRedisCluster } from '../../test/helpers/redis-cluster.ts';
import { type BenchContext, type Entry, median, round } from '../lib/common.ts';
import { backgroundRunner } from './background.ts';
import { minimalRunner } from './sql-minimal.ts';
import { opspadTablesRunner } from './sql-opspad-tables.ts';
import { WORKER_PROCESSES, workerProcessesRunner } from './worker-processes.ts';

export interface ThroughputCharts {
  minimal: Record<number, number>;
  opspadTables: Record<number, number>;
  processes: Record<number, number>;
  inProcess: Record<number, number>;
  processesPgQueue: Record<number, number>;
  cluster: Record<number, number>;
}

type System = keyof ThroughputCharts;

export async function benchThroughput(
  ctx: BenchContext,
  organizationId: string,
): Promise<{ entries: Entry[] } & ThroughputCharts> {
  const cluster = await startRedisCluster();
  ctx.defer(() => cluster.stop());
  const runners: Record<System, (batch: number, items?: number) => Promise<number>> = {
    minimal: await minimalRunner(ctx),
    opspadTables: opspadTablesRunner(ctx, organizationId),
    processes: (await workerProcessesRunner(ctx, organizationId, 'redis')).run,
    inProcess: (await backgroundRunner(ctx, organizationId)).run,
    processesPgQueue: (await workerProcessesRunner(ctx, organizationId, 'postgres')).run,
    cluster: (await backgroundRunner(ctx, organizationId, 'redis', cluster.nodes)).run,
  };
  const charts: ThroughputCharts = {
    minimal: {},
    opspadTables: {},
    processes: {},
    inProcess: {},
    processesPgQueue: {},
    cluster: {},
  };
  const entries: Entry[] = [];
  const batches = Object.keys(ctx.plan.ceilingItems)
    .map(Number)
    .sort((a, b) => b - a);
  // One untimed round first, a tenth of the items each: every system starts measured with its
  // connections open, its code compiled and its statements planned, as a running service is.
  // (A cold first round cost the worker processes 10-15 % in a one-round quick run.)
  for (const system of Object.keys(runners) as System[]) {
    const batch = batches[0] as number;
    await runners[system](batch, Math.max(batch * 8, Math.round((ctx.plan.backgroundItems[batch] as number) / 10)));
  }
  for (const batch of batches) {
    // Below 100 items a batch the queue's cost per job dominates, on either backend.
    const systems = (Object.keys(runners) as System[]).filter(
      (s) => batch >= 100 || (s !== 'processesPgQueue' && s !== 'cluster'),
    );
    const runs = Object.fromEntries(systems.map((s) => [s, [] as number[]])) as Record<System, number[]>;
    for (let i = 0; i < ctx.plan.repeats; i++) {
      for (const system of systems) {
        runs[system].push(await runners[system](batch));
      }
    }
    for (const system of systems) {
      charts[system][batch] = median(runs[system]);
    }
    const m = (s: System) => Math.round(median(runs[s]));
    ctx.log(
      `batch ${batch}: ${systems.map((s) => `${s} ${runs[s].map((r) => Math.round(r)).join(', ')}`).join('; ')} items/s`,
    );
    const n = ctx.plan.backgroundItems[batch];
    entries.push(
      {
        name: `sql_minimal_b${batch}`,
        value: m('minimal'),
        unit: 'items/s',
        n: ctx.plan.ceilingItems[batch],
        note: '4 clients, minimal table, lease + record SQL only',
      },
      {
        name: `sql_opspad_tables_b${batch}`,
        value: m('opspadTables'),
        unit: 'items/s',
        baseline: `sql_minimal_b${batch}`,
        n: ctx.plan.ceilingItems[batch],
        note: "4 clients, the same SQL on opspad's item table",
      },
      {
        name: `opspad_background_b${batch}`,
        value: m('processes'),
        unit: 'items/s',
        baseline: `sql_minimal_b${batch}`,
        n,
        note: `demo handler no-op, ${WORKER_PROCESSES} opspad worker processes, 4 lanes, jobs in Redis`,
      },
      {
        name: `opspad_inprocess_b${batch}`,
        value: m('inProcess'),
        unit: 'items/s',
        baseline: `opspad_background_b${batch}`,
        n,
        note: "the same, workers in the bench's process",
      },
    );
    if (systems.includes('processesPgQueue')) {
      entries.push({
        name: `opspad_background_b${batch}_pgqueue`,
        value: m('processesPgQueue'),
        unit: 'items/s',
        baseline: `opspad_background_b${batch}`,
        ratio: round(median(runs.processesPgQueue) / median(runs.processes), 3),
        n,
        note: `${WORKER_PROCESSES} worker processes, jobs in Postgres (no Redis)`,
      });
    }
    if (systems.includes('cluster')) {
      entries.push({
        name: `opspad_background_b${batch}_cluster`,
        value: m('cluster'),
        unit: 'items/s',
        baseline: `opspad_inprocess_b${batch}`,
        ratio: round(median(runs.cluster) / median(runs.inProcess), 3),
        n,
        note: 'in one process, jobs in a 3-master Redis Cluster on loopback',
      });
    }
  }
  return { entries, ...charts };
}
