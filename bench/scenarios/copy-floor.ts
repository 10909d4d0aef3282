/**
 * `copy_1m_floor_s`: what Postgres alone takes for the rows of a create of 1,000,000 ids, measured
 * in the same run as `create_1m_s`, so that the create can be read against the machine it ran on.
 *
 * The rows are the create's own (the binary COPY rows of src/store/operations/item-copy-rows.ts, encoded
 * before the clock starts), written by one client in one transaction into a fresh table of the
 * item table's shape: its columns, defaults, check, indexes and fillfactor, copied from the
 * catalog. What the create adds on top of this is reading and checking the body, the operation's
 * own rows and the statistics refresh; what this floor does not have is an item table that already
 * holds millions of rows (its indexes a level deeper).
 *
 * A create's cost is mostly pages that a growing file takes (heap, two indexes, WAL), and on a
 * virtual machine that hands free memory back to its host those pages cost what the host charges
 * that minute (docs/performance.md, "What limits each figure"): this figure moves with it.
 */
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { COPY_HEADER, COPY_TRAILER, ItemRowEncoder } from '../../src/store/operations/item-copy-rows.ts';
import { type BenchContext, type Entry, round } from '../lib/common.ts';
import { freshMemorySecondsPerGb } from '../lib/machine.ts';

const FLOOR_TABLE = 'bench_copy_floor';

export async function benchCopyFloor(ctx: BenchContext, ids: readonly string[]): Promise<Entry> {
  const [table] = await ctx.db.query<{ reloptions: string[] | null }>(
    `SELECT reloptions FROM pg_class WHERE oid = 'assistant_operation_item'::regclass`,
  );
  const storage = table?.reloptions?.length ? ` WITH (${table.reloptions.join(', ')})` : '';
  await ctx.db.query(`DROP TABLE IF EXISTS ${FLOOR_TABLE}`);
  await ctx.db.query(`CREATE TABLE ${FLOOR_TABLE} (LIKE assistant_operation_item INCLUDING ALL)${storage}`);
  // Settled as the create was (bench/run.ts): the create's pages are written now, not by the
  // checkpointer during the COPY; and the floor's own pages before the scenarios after it.
  await ctx.db.query('CHECKPOINT');
  try {
    const touch = freshMemorySecondsPerGb();
    const chunks: Uint8Array[] = [COPY_HEADER, ...new ItemRowEncoder(randomUUID()).rows(ids, 0), COPY_TRAILER];
    const start = performance.now();
    await ctx.db.transaction(async (tx) => {
      if (!tx.copyIn) {
        throw new Error('the bench runs on PostgreSQL, which has COPY');
      }
      await tx.copyIn(`COPY ${FLOOR_TABLE} (operation_id, ordinal, item_id) FROM STDIN (FORMAT binary)`, chunks);
    });
    const seconds = (performance.now() - start) / 1000;
    ctx.log(
      `COPY of the same ${ids.length} rows by Postgres alone: ${round(seconds, 2)} s (fresh memory ${round(touch, 2)} s/GB)`,
    );
    return {
      name: 'copy_1m_floor_s',
      value: round(seconds, 2),
      unit: 's',
      n: ids.length,
      note: `Postgres alone: the create's rows, binary COPY into a fresh table of the item table's shape${storage}, one transaction; fresh memory cost ${round(touch, 2)} s/GB just before`,
    };
  } finally {
    await ctx.db.query(`DROP TABLE IF EXISTS ${FLOOR_TABLE}`);
    await ctx.db.query('CHECKPOINT');
  }
}
