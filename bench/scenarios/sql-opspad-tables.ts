/**
 * The least SQL that leases and records a batch on opspad's own tables (`sql_opspad_tables_*`,
 * once called the "SQL ceiling"; it is not one: it inherits the item table's indexes and their
 * cost, which sql-minimal.ts does without). Four clients loop: lease the next batch (opspad's
 * lease statement), then record it (one UPDATE of the rows, the lease row dropped and the
 * operation's counters, in one transaction). The gap to `opspad_background_*` is what opspad adds around these statements:
 * checks, audit trail, counts, queue; the gap to `sql_minimal_*` is what the table costs.
 */
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { createOperation } from '../../src/store/index.ts';
import { LEASE_NEXT_SQL } from '../../src/store/leases/item-sql.ts';
import { type BenchContext, itemIds, timed } from '../lib/common.ts';

const CLIENTS = 4;

/**
 * Records a leased batch by its ordinals (the primary key): the cheapest way there is. The
 * lease's end is counted in `attempts`, as opspad counts it.
 */
const MARK_COMPLETED_SQL = `UPDATE assistant_operation_item
  SET status = 'completed', attempts = attempts + 1, updated_at = now()
  WHERE operation_id = $1 AND ordinal = ANY($2::int[]) AND status = 'pending'`;

/** The client's lease row goes with its batch, all recorded. */
const DROP_LEASE_SQL = 'DELETE FROM assistant_operation_lease WHERE operation_id = $1 AND owner = $2';

async function runOnce(ctx: BenchContext, organizationId: string, items: number, batch: number): Promise<number> {
  const scope = { organizationId, conversationId: randomUUID() };
  const { operation } = await createOperation(ctx.db, scope, {
    operationType: 'bench_opspad_tables',
    itemIds: itemIds(items),
    batchSize: batch,
    queryParams: null,
    notes: null,
    execution: 'assistant',
    actor: 'bench',
  });
  const pool = new pg.Pool({ connectionString: ctx.databaseUrl, max: CLIENTS });
  pool.on('error', () => {}); // an idle client's lost connection must not end the run
  await Promise.all(Array.from({ length: CLIENTS }, () => pool.query('SELECT 1')));
  let cursor = 0;
  let recorded = 0;
  const client = async (n: number) => {
    const conn = await pool.connect();
    try {
      for (;;) {
        const leased = await conn.query<{ ordinal: number }>(LEASE_NEXT_SQL, [
          operation.id,
          `client-${n}`,
          300,
          cursor,
          batch,
          true,
        ]);
        if (leased.rows.length === 0) {
          return;
        }
        const ordinals = leased.rows.map((r) => r.ordinal);
        cursor = Math.max(cursor, Math.max(...ordinals) + 1);
        await conn.query('BEGIN');
        await conn.query(MARK_COMPLETED_SQL, [operation.id, ordinals]);
        await conn.query(DROP_LEASE_SQL, [operation.id, `client-${n}`]);
        await conn.query(
          'UPDATE assistant_operation SET completed_count = completed_count + $2, updated_at = now() WHERE id = $1',
          [operation.id, ordinals.length],
        );
        await conn.query('COMMIT');
        recorded += ordinals.length;
      }
    } finally {
      conn.release();
    }
  };
  const { ms } = await timed(() => Promise.all(Array.from({ length: CLIENTS }, (_, n) => client(n))));
  await pool.end();
  if (recorded !== items) {
    throw new Error(`the SQL on opspad's tables recorded ${recorded} of ${items} items`);
  }
  return (items / ms) * 1000;
}

/** Runs the loop once for `batch` over the plan's item count; items/s. */
export function opspadTablesRunner(ctx: BenchContext, organizationId: string) {
  return (batch: number, items = ctx.plan.ceilingItems[batch] as number) => runOnce(ctx, organizationId, items, batch);
}
