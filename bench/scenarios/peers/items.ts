/**
 * The durable per-item result every system beside opspad keeps: a table of its own (`items`, in
 * the system's own schema) and the one statement that records a batch of it. The peers' handlers
 * and the minimal floor (sql-minimal.ts) all run exactly this statement.
 *
 * Ids are text shaped like opspad's (`r0003-contact-00000042`: a run prefix, then the same ids the
 * opspad scenarios use), compared bytewise as opspad's item ids are (drizzle/0014), and the table
 * has opspad's item fillfactor, so a record is a HOT update here as it is there.
 */
import type pg from 'pg';
import { itemIds } from '../../lib/common.ts';

/** opspad's item table's fillfactor (drizzle/0013_item_written_once.sql). */
const FILLFACTOR = 45;

export function createItemsTableSql(schema: string): string {
  return `CREATE TABLE IF NOT EXISTS ${schema}.items (
    id text COLLATE "C" PRIMARY KEY, status text NOT NULL DEFAULT 'pending', recorded_at timestamptz)
    WITH (fillfactor = ${FILLFACTOR})`;
}

/** $1 the batch's ids: each one recorded, durably, in one statement. */
export function recordItemsSql(schema: string): string {
  return `UPDATE ${schema}.items SET status = 'completed', recorded_at = now() WHERE id = ANY($1::text[])`;
}

/** The ids of run `run`: `count` of them, distinct from every other run's. */
export function runItemIds(run: number, count: number): string[] {
  const prefix = `r${String(run).padStart(4, '0')}-`;
  return itemIds(count).map((id) => prefix + id);
}

/** Inserts the run's rows, pending (not timed: the peers' counterpart of opspad's create). */
export async function insertRunItems(pool: pg.Pool, schema: string, ids: readonly string[]): Promise<void> {
  for (let start = 0; start < ids.length; start += 50_000) {
    await pool.query(`INSERT INTO ${schema}.items (id) SELECT unnest($1::text[])`, [ids.slice(start, start + 50_000)]);
  }
}

/** How many of the run's items are not recorded yet (a range scan of the primary key). */
export async function unrecordedCount(pool: pg.Pool, schema: string, run: number): Promise<number> {
  const prefix = `r${String(run).padStart(4, '0')}-`;
  const { rows } = await pool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM ${schema}.items WHERE id >= $1 AND id < $2 AND status <> 'completed'`,
    [prefix, `${prefix}~`],
  );
  return rows[0]?.n ?? 0;
}
