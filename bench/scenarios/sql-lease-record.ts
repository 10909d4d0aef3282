/**
 * The lease-and-record loop on a minimal table (`sql_lease_record_*`; called `sql_minimal_*` until
 * the floor became the cheapest per-item design, sql-minimal.ts): primary key (operation,
 * ordinal), one partial index on pending rows, an integer status, `= ANY(array)` statements, four
 * clients. Each loops: lease the next batch (the pending rows from the cursor, `FOR UPDATE SKIP
 * LOCKED`, flipped in one UPDATE), then record it (one UPDATE of the rows by primary key and one
 * of the operation's counter, in one transaction). Every item is written twice (leased, then
 * recorded), as opspad's ledger used to write it: the shape of opspad's own design without its
 * queue, handler, audit trail or lookups, which `opspad_background_b1000` is held to a share of.
 */
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { type BenchContext, itemIds, timed } from '../lib/common.ts';

const CLIENTS = 4;
const PENDING = 0;
const LEASED = 1;
const COMPLETED = 2;

const SCHEMA = [
  `CREATE TABLE IF NOT EXISTS bench_lease_record_operation (id uuid PRIMARY KEY, completed_count int NOT NULL DEFAULT 0)`,
  `CREATE TABLE IF NOT EXISTS bench_lease_record_item (
     operation_id uuid NOT NULL, ordinal int NOT NULL, item_id text NOT NULL,
     status smallint NOT NULL DEFAULT ${PENDING}, lease_owner text, lease_expires_at timestamptz,
     PRIMARY KEY (operation_id, ordinal))`,
  `CREATE INDEX IF NOT EXISTS bench_lease_record_item_pending ON bench_lease_record_item (operation_id, ordinal)
     WHERE status = ${PENDING}`,
];

const LEASE_SQL = `UPDATE bench_lease_record_item
  SET status = ${LEASED}, lease_owner = $2, lease_expires_at = now() + interval '300 seconds'
  WHERE operation_id = $1 AND ordinal = ANY(ARRAY(
    SELECT ordinal FROM bench_lease_record_item
    WHERE operation_id = $1 AND status = ${PENDING} AND ordinal >= $3
    ORDER BY ordinal LIMIT $4 FOR UPDATE SKIP LOCKED))
  RETURNING ordinal`;

const RECORD_SQL = `UPDATE bench_lease_record_item
  SET status = ${COMPLETED}, lease_owner = NULL, lease_expires_at = NULL
  WHERE operation_id = $1 AND ordinal = ANY($2::int[]) AND status = ${LEASED}`;

async function runOnce(pool: pg.Pool, items: number, batch: number): Promise<number> {
  const operationId = randomUUID();
  await pool.query('INSERT INTO bench_lease_record_operation (id) VALUES ($1)', [operationId]);
  await pool.query(
    `INSERT INTO bench_lease_record_item (operation_id, ordinal, item_id)
     SELECT $1, (u.o - 1)::int, u.v FROM unnest($2::text[]) WITH ORDINALITY AS u(v, o)`,
    [operationId, itemIds(items)],
  );
  await pool.query('ANALYZE bench_lease_record_item');
  let cursor = 0;
  let recorded = 0;
  const client = async (n: number) => {
    const conn = await pool.connect();
    try {
      for (;;) {
        const leased = await conn.query<{ ordinal: number }>(LEASE_SQL, [operationId, `client-${n}`, cursor, batch]);
        if (leased.rows.length === 0) {
          return;
        }
        const ordinals = leased.rows.map((r) => r.ordinal);
        cursor = Math.max(cursor, Math.max(...ordinals) + 1);
        await conn.query('BEGIN');
        await conn.query(RECORD_SQL, [operationId, ordinals]);
        await conn.query(
          'UPDATE bench_lease_record_operation SET completed_count = completed_count + $2 WHERE id = $1',
          [operationId, ordinals.length],
        );
        await conn.query('COMMIT');
        recorded += ordinals.length;
      }
    } finally {
      conn.release();
    }
  };
  const { ms } = await timed(() => Promise.all(Array.from({ length: CLIENTS }, (_, n) => client(n))));
  if (recorded !== items) {
    throw new Error(`the lease-and-record SQL recorded ${recorded} of ${items} items`);
  }
  return (items / ms) * 1000;
}

/** Its table, created in the run's database; `run(batch)` → items/s over the plan's item count. */
export async function leaseRecordRunner(ctx: BenchContext) {
  const pool = new pg.Pool({ connectionString: ctx.databaseUrl, max: CLIENTS });
  // An idle client whose connection ends (the run's database dropped WITH (FORCE) at its end)
  // emits 'error'; unheard, it would end the run (the other SQL runners listen too).
  pool.on('error', () => {});
  ctx.defer(() => pool.end());
  for (const statement of SCHEMA) {
    await pool.query(statement);
  }
  await Promise.all(Array.from({ length: CLIENTS }, () => pool.query('SELECT 1')));
  return (batch: number, items = ctx.plan.ceilingItems[batch] as number) => runOnce(pool, items, batch);
}
