/**
 * The floor (`sql_minimal_*`): the cheapest durable per-item design there is, so that opspad and
 * its peers are read against what Postgres itself costs, not against a design's own shape. A job
 * row carries its batch's ids (as a peer's job does); each of four clients loops over one
 * transaction per batch: take the next job by deleting it (`SKIP LOCKED`: the open transaction is
 * the lease, and a client that dies gives the job back by rolling back), record its ids with the
 * peers' own statement (peers/items.ts), commit. Each item is written once, each job once; one
 * commit and three round trips a batch (`BEGIN` travels with the take).
 *
 * What it does not do, and opspad does: keep a job's lease past one transaction (a handler that
 * calls a provider for minutes), count outcomes, record failures and their reasons, pause or
 * cancel mid-operation, survive a worker that hangs rather than dies, tell the assistant anything.
 */
import pg from 'pg';
import { type BenchContext, timed } from '../lib/common.ts';
import { createItemsTableSql, insertRunItems, recordItemsSql, runItemIds, unrecordedCount } from './peers/items.ts';

const CLIENTS = 4;
const SCHEMA = 'bench_floor';
const JOB_CHUNK = 10_000;

/**
 * Opens the batch's transaction and takes the oldest job from `from` on (the lowest id not taken
 * yet, so the scan does not walk the jobs taken before it): one round trip, a simple query.
 */
const takeJobSql = (from: number) => `BEGIN; DELETE FROM ${SCHEMA}.jobs WHERE id = (
  SELECT id FROM ${SCHEMA}.jobs WHERE id >= ${Math.trunc(from)} ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED)
  RETURNING id, ids`;

async function runOnce(ctx: BenchContext, pool: pg.Pool, run: number, items: number, batch: number): Promise<number> {
  const ids = runItemIds(run, items);
  await insertRunItems(pool, SCHEMA, ids);
  const jobs: string[][] = [];
  for (let start = 0; start < ids.length; start += batch) {
    jobs.push(ids.slice(start, start + batch));
  }
  let from = Number.POSITIVE_INFINITY;
  for (let start = 0; start < jobs.length; start += JOB_CHUNK) {
    // Each job's ids as one text[] literal inside a jsonb array: one parameter for the chunk.
    const { rows } = await pool.query<{ first: string }>(
      `INSERT INTO ${SCHEMA}.jobs (ids)
       SELECT ARRAY(SELECT jsonb_array_elements_text(j)) FROM jsonb_array_elements($1::jsonb) AS j
       RETURNING id AS first`,
      [JSON.stringify(jobs.slice(start, start + JOB_CHUNK))],
    );
    from = Math.min(from, ...rows.map((row) => Number(row.first)));
  }
  const record = recordItemsSql(SCHEMA);
  let recorded = 0;
  const client = async () => {
    const conn = await pool.connect();
    try {
      for (;;) {
        const results = (await conn.query(takeJobSql(from))) as unknown as pg.QueryResult<{
          id: string;
          ids: string[];
        }>[];
        const job = results[1]?.rows[0];
        if (!job) {
          await conn.query('COMMIT');
          return;
        }
        // Jobs below it are taken or being taken (SKIP LOCKED passes over the latter).
        from = Math.max(from, Number(job.id));
        await conn.query(record, [job.ids]);
        await conn.query('COMMIT');
        recorded += job.ids.length;
      }
    } catch (error) {
      await conn.query('ROLLBACK').catch(() => {});
      throw error;
    } finally {
      conn.release();
    }
  };
  await ctx.probe?.before(`sql_minimal_b${batch}`);
  const { ms } = await timed(() => Promise.all(Array.from({ length: CLIENTS }, client)));
  await ctx.probe?.after(`sql_minimal_b${batch}`, items);
  if (recorded !== items || (await unrecordedCount(pool, SCHEMA, run)) !== 0) {
    throw new Error(`the minimal floor recorded ${recorded} of ${items} items`);
  }
  return (items / ms) * 1000;
}

/** The floor's schema, created in the run's database; `run(batch)` → items/s over the plan's item count. */
export async function minimalRunner(ctx: BenchContext) {
  const pool = new pg.Pool({ connectionString: ctx.databaseUrl, max: CLIENTS });
  pool.on('error', () => {});
  await pool.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
  await pool.query(`CREATE SCHEMA ${SCHEMA}`);
  await pool.query(createItemsTableSql(SCHEMA));
  await pool.query(`CREATE TABLE ${SCHEMA}.jobs (id bigserial PRIMARY KEY, ids text[] NOT NULL)`);
  ctx.defer(async () => {
    await pool.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`).catch(() => {});
    await pool.end();
  });
  await Promise.all(Array.from({ length: CLIENTS }, () => pool.query('SELECT 1')));
  let runs = 0;
  return (batch: number, items = ctx.plan.ceilingItems[batch] as number) => runOnce(ctx, pool, runs++, items, batch);
}
