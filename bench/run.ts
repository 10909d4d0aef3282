/**
 * `npm run bench [-- --quick] [-- --only a,b] [-- --profile]`
 *
 * Measures opspad side by side with what it is built on and against: raw BullMQ, the least SQL
 * that can lease and record item rows (on a minimal table, and on opspad's own), and the seed's
 * literal JSONB design. It states the load average, the machine's speed (bench/lib/machine.ts) and
 * Postgres' autovacuum setting it ran with. Every figure comes
 * from this one run on this machine; comparisons are ratios. It prints a table, checks the
 * targets (bench/lib/report.ts; docs/performance.md), writes bench/results/latest.json and, for a full run, the
 * two charts. A fresh database (opspad_bench_<random>) and BullMQ prefix are created for the
 * run and removed at its end; a CHECKPOINT before each group of scenarios writes out what the
 * groups before it left dirty.
 *
 * --quick   smaller sizes and a 5 s HTTP loop: about a minute; a smoke test, not a measurement
 * --only    comma-separated scenario groups: bullmq, throughput (the minimal floor, the
 *           lease-and-record SQL and the same SQL on opspad's tables, opspad in worker processes,
 *           in-process and on a Redis Cluster, pg-boss and graphile-worker, in turns), peers (the
 *           part of throughput the peer comparison needs: the floor, opspad's worker processes on
 *           both backends, the two peers), updates, http (create, record, HTTP loop), context (and
 *           the event-loop block of reorganizing the largest pad), create (the creates of http
 *           alone: 1,000,000 ids, their copy floor, 1,000,000 UUIDs sorted and not), worker (memory, and what traces
 *           cost a worker), shapes (a slow provider through the demo and webhook handlers, many
 *           small operations over HTTP), export (an operation's results file of 1,000,000 items,
 *           and the server's RSS meanwhile), scale (an operation of 10,000,000 ids; small in --quick);
 *           and, only when named, statements (where a batch's server time goes: pg_stat_statements
 *           on a cluster of the run's own, printed, not in the table: statements.ts)
 * --profile start the opspad processes with --cpu-prof (profiles in bench/results/profiles)
 * --cpu     log the CPU each throughput run spent an item, by process group (Postgres, opspad's
 *           workers, the peers' workers, Redis, the bench): cpu-split.ts; Linux only
 *
 * Exits 0 whether targets are met or not (the table says); non-zero only when a scenario fails.
 */
import { randomUUID } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { createApiKey, createPostgresDatabase, runMigrations } from '../src/store/index.ts';
import { recordCostChart, type ThroughputPoint, throughputChart, writeSvg } from './lib/charts.ts';
import { type BenchContext, type Entry, FULL_PLAN, QUICK_PLAN, setWaitLimit } from './lib/common.ts';
import { cpuSplitProbe } from './lib/cpu-split.ts';
import { acquireRunResources } from './lib/env.ts';
import { describeMachine, type MachineSpeed, measureSpeed } from './lib/machine.ts';
import { applyTargets, formatTable, writeResults } from './lib/report.ts';
import { benchBullmq } from './scenarios/bullmq.ts';
import { benchContext } from './scenarios/context.ts';
import { benchEventLoop } from './scenarios/event-loop.ts';
import { benchCreates, benchHttp } from './scenarios/http.ts';
import { benchUpdates } from './scenarios/record.ts';
import { benchResultsExport } from './scenarios/results-export.ts';
import { benchScale } from './scenarios/scale.ts';
import { benchIoBound } from './scenarios/shapes/io-bound.ts';
import { benchManyOps } from './scenarios/shapes/many-ops.ts';
import { benchWebhook } from './scenarios/shapes/webhook.ts';
import { benchStatements } from './scenarios/statements.ts';
import { benchThroughput, type ThroughputCharts } from './scenarios/throughput.ts';
import { benchTracing } from './scenarios/tracing.ts';
import { benchWorkerRss } from './scenarios/worker-rss.ts';

const RESULTS_DIR = fileURLToPath(new URL('./results/', import.meta.url));
const GROUPS = [
  'bullmq',
  'throughput',
  'peers',
  'updates',
  'http',
  'create',
  'context',
  'worker',
  'shapes',
  'export',
  'scale',
] as const;
/** Groups that run only when named (--only): not figures of the table. */
const NAMED_ONLY = ['statements'] as const;

/** The order entries appear in the table, whatever order they were measured in. */
const ORDER = [
  'bullmq_job_per_item',
  'bullmq_job_per_batch_b100',
  'bullmq_job_per_batch_b1000',
  'pgboss_job_per_item',
  'graphile_job_per_item',
  'sql_minimal_b10',
  'sql_minimal_b100',
  'sql_minimal_b1000',
  'sql_lease_record_b10',
  'sql_lease_record_b100',
  'sql_lease_record_b1000',
  'pgboss_array_b10',
  'pgboss_array_b100',
  'pgboss_array_b1000',
  'graphile_array_b10',
  'graphile_array_b100',
  'graphile_array_b1000',
  'sql_opspad_tables_b10',
  'sql_opspad_tables_b100',
  'sql_opspad_tables_b1000',
  'opspad_background_b10',
  'opspad_background_b100',
  'opspad_background_b1000',
  'opspad_background_b100_pgqueue',
  'opspad_background_b1000_pgqueue',
  'opspad_background_b1000_limited',
  'opspad_background_b100_cluster',
  'opspad_background_b1000_cluster',
  'opspad_inprocess_b10',
  'opspad_inprocess_b100',
  'opspad_inprocess_b1000',
  'worker_process_items_per_s_n100k',
  'worker_process_items_per_s',
  'record_ms_n1k',
  'record_ms_n1m',
  'record_ms_n10m',
  'lease_ms_n1k',
  'lease_ms_n1m',
  'lease_ms_n10m',
  'seed_jsonb_update_ms_n10k',
  'opspad_update_ms_n10k',
  'copy_1m_floor_s',
  'create_1m_s',
  'create_1m_healthz_max_ms',
  'create_1m_peak_rss_mb',
  'create_1m_uuid_sorted_s',
  'create_1m_uuid_s',
  'create_10m_s',
  'create_10m_peak_rss_mb',
  'worker_peak_rss_mb',
  'worker_untraced_items_per_s',
  'worker_traced_items_per_s',
  'context_render_ms',
  'context_render_chars',
  'event_loop_max_block_ms',
  'context_tokens_typical',
  'context_tokens_max',
  'http_single_p50_ms',
  'http_single_p99_ms',
  'http_loop_p50_ms',
  'http_loop_p99_ms',
  'http_loop_errors',
  'http_loop_rps',
  'io_bound_items_per_s',
  'io_bound_efficiency',
  'io_bound_worker_peak_rss_mb',
  'io_bound_cpu_us_per_item',
  'webhook_floor_items_per_s',
  'webhook_floor_efficiency',
  'webhook_items_per_s',
  'webhook_efficiency',
  'webhook_worker_peak_rss_mb',
  'webhook_cpu_us_per_item',
  'many_ops_items_per_s',
  'many_ops_first_item_p99_ms',
  'many_ops_org_finish_spread',
  'export_jsonl_rows_per_s',
  'export_jsonl_server_peak_rss_mb',
  'export_csv_rows_per_s',
  'export_csv_server_peak_rss_mb',
];

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      quick: { type: 'boolean', default: false },
      only: { type: 'string' },
      profile: { type: 'boolean', default: false },
      cpu: { type: 'boolean', default: false },
    },
  });
  const plan = values.quick ? QUICK_PLAN : FULL_PLAN;
  const only = new Set(values.only ? values.only.split(',').map((s) => s.trim()) : GROUPS);
  for (const group of only) {
    if (![...GROUPS, ...NAMED_ONLY].includes(group as (typeof GROUPS)[number])) {
      throw new Error(`--only: unknown scenario group "${group}" (groups: ${[...GROUPS, ...NAMED_ONLY].join(', ')})`);
    }
  }
  const began = Date.now();
  const loadBefore = loadavg()[0] ?? 0;
  const log = (message: string) =>
    process.stderr.write(`[${((Date.now() - began) / 1000).toFixed(1).padStart(5)} s] ${message}\n`);

  const resources = await acquireRunResources();
  log(`${values.quick ? 'quick' : 'full'} run: database ${resources.databaseName}, BullMQ prefix ${resources.prefix}`);
  const cleanups: (() => Promise<void> | void)[] = [];
  const db = createPostgresDatabase({
    connectionString: resources.databaseUrl,
    poolSize: 8,
    applicationName: 'opspad-bench',
  });
  const profileDir = join(RESULTS_DIR, 'profiles');
  if (values.profile) {
    mkdirSync(profileDir, { recursive: true });
  }
  const ctx: BenchContext = {
    plan,
    databaseUrl: resources.databaseUrl,
    db,
    redisUrl: resources.redisUrl,
    prefix: resources.prefix,
    childNodeFlags: values.profile ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : [],
    log,
    defer: (cleanup) => cleanups.push(cleanup),
    ...(values.cpu ? { probe: cpuSplitProbe(resources.databaseName, log) } : {}),
  };
  const onSignal = () => {
    log('interrupted: cleaning up');
    void cleanup().finally(() => process.exit(130));
  };
  let cleaned: Promise<void> | undefined;
  const cleanup = () => {
    cleaned ??= (async () => {
      for (const step of cleanups.reverse()) {
        await Promise.resolve()
          .then(step)
          .catch((error: unknown) => log(`cleanup: ${(error as Error).message}`));
      }
      await db.close().catch(() => {});
      await resources.release().catch((error: unknown) => log(`cleanup: ${(error as Error).message}`));
    })();
    return cleaned;
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  setWaitLimit(plan.waitLimitMs);
  // A stuck scenario ends the run with its last line above, cleaned up, instead of holding CI.
  const overrun = setTimeout(() => {
    log(`the run took longer than ${plan.runLimitMs / 60_000} min: stopping`);
    void cleanup().finally(() => process.exit(1));
  }, plan.runLimitMs);
  overrun.unref();

  const entries: Entry[] = [];
  const throughput: ThroughputPoint[] = [];
  let updates: { size: number; design: string; ms: number }[] = [];
  let machine: Record<string, unknown> = {};
  let speedBefore: MachineSpeed | undefined;
  try {
    await runMigrations(db);
    machine = await describeMachine(ctx);
    log(`machine: ${JSON.stringify(machine)}`);
    speedBefore = measureSpeed();
    log(`speed: ${JSON.stringify(speedBefore)}`);
    const { organization_id: organizationId } = await createApiKey(db, `bench-${randomUUID()}`);

    const addPoints = (system: string, chart: Record<number, number>) => {
      for (const [batch, itemsPerSecond] of Object.entries(chart)) {
        throughput.push({ batch: Number(batch), system, itemsPerSecond });
      }
    };
    // Each group starts from a settled database: the pages an earlier group dirtied (millions of
    // item rows after the throughput runs) are written now, not by the checkpointer during the
    // next group's measurement. Without it, a full run's create of 1,000,000 ids took 5.35-5.58 s
    // against 2.87 s right after a CHECKPOINT, and the seed loop's p99 was 61.7-67.8 ms against
    // 56.8 ms. The data stays: each group runs on the database the earlier ones filled.
    const settle = async (group: string) => {
      const started = Date.now();
      await db
        .query('CHECKPOINT')
        .then(() => log(`settled before ${group}: CHECKPOINT in ${Date.now() - started} ms`))
        .catch((error: unknown) => log(`not settled before ${group} (${(error as Error).message})`));
    };
    if (only.has('bullmq')) {
      await settle('bullmq');
      const result = await benchBullmq(ctx);
      entries.push(...result.entries);
      // Job per item only: a job carrying a batch does no per-item work at all (see the table).
      addPoints('raw BullMQ, a no-op job per item', { 1: result.chart[1] as number });
    }
    if (only.has('throughput') || only.has('peers')) {
      // throughput holds the peers' systems too: with both asked for, it runs once.
      const group = only.has('throughput') ? 'throughput' : 'peers';
      await settle(group);
      const result = await benchThroughput(ctx, organizationId, group === 'throughput' ? 'all' : 'peers');
      entries.push(...result.entries);
      const labels: Record<keyof ThroughputCharts, string> = {
        minimal: 'minimal floor (4 clients)',
        leaseRecord: 'lease-and-record SQL (4 clients)',
        opspadTables: "the same SQL on opspad's tables",
        processes: 'opspad, 2 worker processes',
        processesPgQueue: 'opspad, 2 worker processes, jobs in Postgres',
        processesLimited: 'opspad, 2 worker processes, provider limits per key (never binding)',
        inProcess: 'opspad in one process',
        cluster: 'opspad in one process, jobs in a Redis Cluster',
        pgboss: 'pg-boss, 2 worker processes',
        graphile: 'graphile-worker, 2 worker processes',
      };
      for (const [system, label] of Object.entries(labels) as [keyof ThroughputCharts, string][]) {
        addPoints(label, result.charts[system] ?? {});
      }
    }
    if (only.has('updates')) {
      await settle('updates');
      const result = await benchUpdates(ctx, organizationId);
      entries.push(...result.entries);
      updates = result.chart;
    }
    if (only.has('http')) {
      await settle('http');
      entries.push(...(await benchHttp(ctx, organizationId)).entries);
    } else if (only.has('create')) {
      // http holds the creates: with both asked for, they run once.
      await settle('create');
      entries.push(...(await benchCreates(ctx)));
    }
    if (only.has('context')) {
      await settle('context');
      entries.push(...(await benchContext(ctx, organizationId)));
      entries.push(...(await benchEventLoop(ctx, organizationId)));
    }
    if (only.has('worker')) {
      await settle('worker');
      entries.push(...(await benchWorkerRss(ctx, organizationId)));
      entries.push(...(await benchTracing(ctx, organizationId)));
    }
    if (only.has('shapes')) {
      await settle('shapes');
      entries.push(...(await benchIoBound(ctx, organizationId)));
      entries.push(...(await benchWebhook(ctx, organizationId)));
      entries.push(...(await benchManyOps(ctx)));
    }
    if (only.has('export')) {
      await settle('export');
      entries.push(...(await benchResultsExport(ctx)));
    }
    if (only.has('scale')) {
      await settle('scale');
      entries.push(...(await benchScale(ctx)));
    }
    if (only.has('statements')) {
      await benchStatements(ctx);
    }
  } finally {
    await cleanup();
  }

  const speedAfter = measureSpeed();
  entries.sort((a, b) => ORDER.indexOf(a.name) - ORDER.indexOf(b.name));
  const outcome = applyTargets(entries);
  const seconds = Math.round((Date.now() - began) / 1000);
  const meta = {
    mode: values.quick ? 'quick' : 'full',
    finished_at: new Date().toISOString(),
    seconds,
    machine,
    // Other work on the machine skews every figure: the 1-minute load average around the run.
    load_average: { before: loadBefore, after: loadavg()[0] ?? 0 },
    // The same for the machine's speed: fixed work timed at the start and the end.
    speed: { before: speedBefore ?? null, after: speedAfter },
    targets: outcome,
  };
  // The committed charts are the full run's, which docs/performance.md reports: a quick run's or
  // one of some groups (--only) go beside them, never over them.
  const chartsFolder = values.quick ? 'quick/' : values.only ? 'partial/' : '';
  const outDir = join(RESULTS_DIR, chartsFolder);
  writeResults(RESULTS_DIR, entries, meta);
  const where = `${machine.cpus}, ${machine.postgres}, Redis ${machine.redis}`;
  const subtitle = `${where}; ${values.quick ? 'quick run' : `medians of ${plan.repeats} runs`}`;
  const updatesSubtitle = `${where}; medians of up to ${plan.updateSamples} updates, the first of each operation`;
  if (throughput.length > 0) {
    mkdirSync(outDir, { recursive: true });
    writeSvg(join(outDir, 'throughput.svg'), await throughputChart(throughput, subtitle));
  }
  if (updates.length > 0) {
    mkdirSync(outDir, { recursive: true });
    writeSvg(join(outDir, 'record-cost.svg'), await recordCostChart(updates, updatesSubtitle));
  }

  process.stdout.write(
    `\nopspad benchmark (${values.quick ? 'quick: reduced sizes, a smoke test' : 'full'}), ${seconds} s — ${machine.cpus}, ${machine.memory_gb} GB, Node ${machine.node}, ${machine.postgres}, Redis ${machine.redis}; autovacuum ${(machine.postgres_settings as Record<string, string> | undefined)?.autovacuum ?? '?'}; memory handed back to the host: ${machine.memory_reclaim}; load average ${loadBefore.toFixed(1)} before, ${(loadavg()[0] ?? 0).toFixed(1)} after; SHA-256 of 64 MB in ${speedBefore?.sha256_64mb_ms ?? '?'} ms before, ${speedAfter.sha256_64mb_ms} ms after; fresh memory ${speedBefore?.fresh_memory_s_per_gb ?? '?'} s/GB before, ${speedAfter.fresh_memory_s_per_gb} after\n\n`,
  );
  process.stdout.write(`${formatTable(entries)}\n\n`);
  process.stdout.write(
    `targets: ${outcome.met} met, ${outcome.missed} missed${outcome.unknown ? `, ${outcome.unknown} not measured` : ''}. Results: bench/results/latest.json${throughput.length + updates.length > 0 ? `, charts in bench/results/${chartsFolder}` : ''}\n`,
  );
  return 0;
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`bench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  },
);
