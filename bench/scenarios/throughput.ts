/**
 * Items/s by batch size, measured in turns (the minimal floor, the lease-and-record SQL, the same
 * SQL on opspad's tables, opspad with two worker processes, opspad in one process, the Postgres
 * peers pg-boss and graphile-worker with two worker processes each, then from batch 100 the
 * worker processes with the jobs in Postgres and opspad in one process on a Redis Cluster of
 * three masters started for the run, and round again) so that whatever else the machine does
 * weighs on all alike, after one untimed round of each. Batch 1 (a job per item) is the peers'
 * alone.
 *
 * `opspad_background_*` is what users run: two `opspad worker` processes. `opspad_inprocess_*`
 * (workers inside the bench's own process, as an embedder runs them) is the second line.
 *
 * The `peers` group is the same loop with the systems the peer comparison needs: the floor,
 * opspad's worker processes on both backends, and the two peers.
 */
import { startRedisCluster } from '../../test/helpers/redis-cluster.ts';
import { type BenchContext, type Entry, median, round } from '../lib/common.ts';
import { backgroundRunner } from './background.ts';
import { opspadLanes } from './opspad-settings.ts';
import { loadPeers } from './peers/load.ts';
import { describeSettings, type PeerName } from './peers/settings.ts';
import { leaseRecordRunner } from './sql-lease-record.ts';
import { minimalRunner } from './sql-minimal.ts';
import { opspadTablesRunner } from './sql-opspad-tables.ts';
import { WORKER_PROCESSES, workerProcessesRunner } from './worker-processes.ts';

const SYSTEMS = [
  'minimal',
  'leaseRecord',
  'opspadTables',
  'processes',
  'inProcess',
  'processesPgQueue',
  'processesLimited',
  'cluster',
  'pgboss',
  'graphile',
] as const;
type System = (typeof SYSTEMS)[number];

export type ThroughputCharts = Record<System, Record<number, number>>;

/** What the `peers` group runs of the loop. */
const PEER_SYSTEMS: readonly System[] = ['minimal', 'processes', 'processesPgQueue', 'pgboss', 'graphile'];

/** Which systems run at `batch`: below 100 the queue's cost per job dominates either backend. */
function runsAt(system: System, batch: number): boolean {
  if (batch === 1) {
    return system === 'pgboss' || system === 'graphile';
  }
  if (system === 'processesLimited') {
    return batch === 1000;
  }
  return batch >= 100 || (system !== 'processesPgQueue' && system !== 'cluster');
}

async function startRunners(ctx: BenchContext, organizationId: string, systems: readonly System[]) {
  const peer = async (name: PeerName) => {
    const { peerRunner } = await loadPeers((line) => ctx.log(line));
    const runner = await peerRunner(ctx, name);
    return (batch: number, items?: number) =>
      runner.run(batch, items ?? (batch === 1 ? ctx.plan.peerPerItemItems : ctx.plan.peerItems));
  };
  // One pair of Redis worker processes runs both the demo handler and its limited twin.
  let processes: ReturnType<typeof workerProcessesRunner> | undefined;
  const redisProcesses = () => {
    processes ??= workerProcessesRunner(ctx, organizationId, 'redis', {
      limited: systems.includes('processesLimited'),
    });
    return processes;
  };
  const start: Record<System, () => Promise<(batch: number, items?: number) => Promise<number>>> = {
    minimal: () => minimalRunner(ctx),
    leaseRecord: () => leaseRecordRunner(ctx),
    opspadTables: async () => opspadTablesRunner(ctx, organizationId),
    processes: async () => (await redisProcesses()).run,
    inProcess: async () => (await backgroundRunner(ctx, organizationId)).run,
    processesPgQueue: async () => (await workerProcessesRunner(ctx, organizationId, 'postgres')).run,
    processesLimited: async () => (await redisProcesses()).runLimited,
    cluster: async () => {
      const cluster = await startRedisCluster();
      ctx.defer(() => cluster.stop());
      return (await backgroundRunner(ctx, organizationId, 'redis', cluster.nodes)).run;
    },
    pgboss: () => peer('pgboss'),
    graphile: () => peer('graphile'),
  };
  const runners: Partial<Record<System, (batch: number, items?: number) => Promise<number>>> = {};
  for (const system of systems) {
    runners[system] = await start[system]();
  }
  return runners as Record<System, (batch: number, items?: number) => Promise<number>>;
}

/** The items a system's run at `batch` goes through (for the table's `n`). */
function itemsOf(ctx: BenchContext, system: System, batch: number): number | undefined {
  if (system === 'pgboss' || system === 'graphile') {
    return batch === 1 ? ctx.plan.peerPerItemItems : ctx.plan.peerItems;
  }
  return ['minimal', 'leaseRecord', 'opspadTables'].includes(system)
    ? ctx.plan.ceilingItems[batch]
    : ctx.plan.backgroundItems[batch];
}

export async function benchThroughput(
  ctx: BenchContext,
  organizationId: string,
  only: 'all' | 'peers' = 'all',
): Promise<{ entries: Entry[]; charts: Partial<ThroughputCharts> }> {
  const systems = only === 'peers' ? PEER_SYSTEMS : SYSTEMS;
  const runners = await startRunners(ctx, organizationId, systems);
  const charts: Partial<ThroughputCharts> = {};
  const entries: Entry[] = [];
  const batches = [
    ...Object.keys(ctx.plan.ceilingItems)
      .map(Number)
      .sort((a, b) => b - a),
    1,
  ];
  // One untimed round first, a tenth of the items each: every system starts measured with its
  // connections open, its code compiled and its statements planned, as a running service is.
  // (A cold first round cost the worker processes 10-15 % in a one-round quick run.)
  const largest = batches[0] as number;
  for (const system of systems) {
    await runners[system](largest, Math.max(largest * 8, Math.round((itemsOf(ctx, system, largest) as number) / 10)));
  }
  for (const batch of batches) {
    const atBatch = systems.filter((s) => runsAt(s, batch));
    const runs = Object.fromEntries(atBatch.map((s) => [s, [] as number[]])) as Record<System, number[]>;
    for (let i = 0; i < ctx.plan.repeats; i++) {
      for (const system of atBatch) {
        runs[system].push(await runners[system](batch));
      }
    }
    for (const system of atBatch) {
      charts[system] ??= {};
      (charts[system] as Record<number, number>)[batch] = median(runs[system]);
    }
    ctx.log(
      `batch ${batch}: ${atBatch.map((s) => `${s} ${runs[s].map((r) => Math.round(r)).join(', ')}`).join('; ')} items/s`,
    );
    entries.push(...entriesAt(ctx, batch, atBatch, runs));
  }
  return { entries, charts };
}

function entriesAt(ctx: BenchContext, batch: number, systems: readonly System[], runs: Record<System, number[]>) {
  const m = (s: System) => Math.round(median(runs[s]));
  const n = (s: System) => itemsOf(ctx, s, batch);
  const entries: Entry[] = [];
  const add = (system: System, entry: Omit<Entry, 'value' | 'unit' | 'n'>) => {
    if (systems.includes(system)) {
      entries.push({ ...entry, value: m(system), unit: 'items/s', n: n(system) });
    }
  };
  add('minimal', {
    name: `sql_minimal_b${batch}`,
    note: '4 clients; a job row carries the batch ids, taken (deleted) and its items recorded in one transaction: each item written once',
  });
  add('leaseRecord', {
    name: `sql_lease_record_b${batch}`,
    baseline: `sql_minimal_b${batch}`,
    note: '4 clients, minimal table: lease the rows (status flip), then record them and a counter (sql_minimal_* before the floor changed)',
  });
  add('opspadTables', {
    name: `sql_opspad_tables_b${batch}`,
    baseline: `sql_lease_record_b${batch}`,
    note: "4 clients, opspad's lease statement and a record on opspad's item table",
  });
  add('processes', {
    name: `opspad_background_b${batch}`,
    baseline: `sql_minimal_b${batch}`,
    note: `demo handler no-op, ${WORKER_PROCESSES} opspad worker processes, ${opspadLanes(batch)} lanes, jobs in Redis`,
  });
  add('inProcess', {
    name: `opspad_inprocess_b${batch}`,
    baseline: `opspad_background_b${batch}`,
    note: "the same, workers in the bench's process",
  });
  const pgboss = batch === 1 ? 'pgboss_job_per_item' : `pgboss_array_b${batch}`;
  const graphile = batch === 1 ? 'graphile_job_per_item' : `graphile_array_b${batch}`;
  const shape = batch === 1 ? 'a job per item' : `jobs carrying ${batch} ids`;
  add('pgboss', {
    name: pgboss,
    baseline: batch === 1 ? undefined : `sql_minimal_b${batch}`,
    note: `pg-boss, ${WORKER_PROCESSES} worker processes, ${shape}, each id recorded by the handler; ${describeSettings('pgboss', batch)}`,
  });
  add('graphile', {
    name: graphile,
    baseline: batch === 1 ? undefined : `sql_minimal_b${batch}`,
    note: `graphile-worker, ${WORKER_PROCESSES} worker processes, ${shape}, each id recorded by the task; ${describeSettings('graphile', batch)}`,
  });
  if (systems.includes('processesPgQueue') && systems.includes('processes')) {
    entries.push({
      name: `opspad_background_b${batch}_pgqueue`,
      value: m('processesPgQueue'),
      unit: 'items/s',
      baseline: `opspad_background_b${batch}`,
      ratio: round(median(runs.processesPgQueue) / median(runs.processes), 3),
      n: n('processesPgQueue'),
      note: `${WORKER_PROCESSES} worker processes, jobs in Postgres (no Redis)`,
    });
  }
  if (systems.includes('processesLimited') && systems.includes('processes')) {
    entries.push({
      name: `opspad_background_b${batch}_limited`,
      value: m('processesLimited'),
      unit: 'items/s',
      baseline: `opspad_background_b${batch}`,
      ratio: round(median(runs.processesLimited) / median(runs.processes), 3),
      n: n('processesLimited'),
      note: 'the same, the handler under provider limits per organization too high to bind (1,000,000/s, 100,000 in flight)',
    });
  }
  if (systems.includes('cluster') && systems.includes('inProcess')) {
    entries.push({
      name: `opspad_background_b${batch}_cluster`,
      value: m('cluster'),
      unit: 'items/s',
      baseline: `opspad_inprocess_b${batch}`,
      ratio: round(median(runs.cluster) / median(runs.inProcess), 3),
      n: n('cluster'),
      note: 'in one process, jobs in a 3-master Redis Cluster on loopback',
    });
  }
  return entries;
}
