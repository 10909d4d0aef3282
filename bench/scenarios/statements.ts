/**
 * `--only statements`: where a batch's time on the server goes. opspad's two worker processes
 * (worker-processes.ts, jobs in Redis) run an operation at batch 100 and 1,000 against a
 * Postgres cluster of the run's own with pg_stat_statements (track = all: the statements inside
 * the step functions too), reset just before the timed part and read just after it. Each
 * statement that took at least 1 % of the run's time is printed with its calls a batch, its
 * time an item (µs) and its WAL an item (bytes). A top-level call's figures include the
 * statements it ran, and a call's time includes what it waited for (a lock): read the nested
 * statements for CPU, the top-level ones for where a batch waits. Not a figure of the table: the
 * cluster is not the run's server, and the statistics cost time of their own.
 */
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { createApiKey, createPostgresDatabase } from '../../src/store/index.ts';
import { startPostgresCluster } from '../../test/helpers/postgres-cluster.ts';
import type { BenchContext } from '../lib/common.ts';
import { workerProcessesRunner } from './worker-processes.ts';

const BATCHES = [100, 1000] as const;
/** A statement shown takes at least this share of the run's time. */
const SHOWN_SHARE = 0.01;
/** Settings as the shared server runs them (autovacuum off), and the statistics. */
const SETTINGS = {
  autovacuum: 'off',
  shared_preload_libraries: 'pg_stat_statements',
  'pg_stat_statements.track': 'all',
  'pg_stat_statements.max': '2000',
};

interface StatementRow {
  toplevel: boolean;
  calls: number;
  ms: number;
  wal_bytes: number;
  query: string;
}

/** The statements' figures since the last reset, the slowest first (the run's database only). */
const READ_SQL = `SELECT s.toplevel, s.calls::float8 AS calls, s.total_exec_time AS ms, s.wal_bytes::float8 AS wal_bytes,
    regexp_replace(s.query, '\\s+', ' ', 'g') AS query
  FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
  WHERE d.datname = current_database()
  ORDER BY s.total_exec_time DESC`;

/** The lines printed for one run: a header, then one line a statement. */
export function statementLines(batch: number, items: number, rows: readonly StatementRow[]): string[] {
  const batches = items / batch;
  const total = rows.filter((row) => row.toplevel).reduce((sum, row) => sum + row.ms, 0);
  const lines = [
    `statements at batch ${batch} (${items} items; top-level time ${Math.round((total * 1000) / items)} µs an item):`,
    '  level   calls/batch   µs/item   WAL B/item  statement',
  ];
  for (const row of rows) {
    if (row.ms < total * SHOWN_SHARE) {
      continue;
    }
    lines.push(
      [
        `  ${row.toplevel ? 'top   ' : 'nested'}`,
        (row.calls / batches).toFixed(2).padStart(13),
        ((row.ms * 1000) / items).toFixed(2).padStart(9),
        (row.wal_bytes / items).toFixed(1).padStart(12),
        ` ${row.query.slice(0, 110)}`,
      ].join(' '),
    );
  }
  return lines;
}

export async function benchStatements(ctx: BenchContext): Promise<void> {
  const cluster = await startPostgresCluster('bench-statements', SETTINGS);
  ctx.defer(() => cluster.remove());
  const admin = new pg.Client({ connectionString: cluster.url });
  await admin.connect();
  ctx.defer(() => admin.end());
  await admin.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
  const db = createPostgresDatabase({ connectionString: cluster.url, poolSize: 4, applicationName: 'opspad-bench' });
  ctx.defer(() => db.close());
  const { organization_id: organizationId } = await createApiKey(db, `bench-statements-${randomUUID()}`);
  const here: BenchContext = {
    ...ctx,
    databaseUrl: cluster.url,
    db,
    prefix: `${ctx.prefix}-statements`,
    probe: {
      before: async () => {
        await admin.query('SELECT pg_stat_statements_reset()');
      },
      after: async () => {},
    },
  };
  const runner = await workerProcessesRunner(here, organizationId, 'redis');
  ctx.defer(async () => {
    await runner.close();
  });
  for (const batch of BATCHES) {
    await runner.run(batch, batch * 50); // warm: connections, plans, the workers' code
    const items = ctx.plan.backgroundItems[batch] as number;
    const itemsPerSecond = await runner.run(batch, items);
    const { rows } = await admin.query<StatementRow>(READ_SQL);
    ctx.log(`statements: batch ${batch}, ${Math.round(itemsPerSecond)} items/s with the statistics on`);
    for (const line of statementLines(batch, items, rows)) {
      ctx.log(line);
    }
  }
}
