/**
 * A create's items written in one piece (the ids already in memory): COPY where the engine has
 * it (the rows of item-copy-rows.ts), chunked INSERTs on PGlite. Cost: O(ids), a few round trips
 * per 100,000 rows.
 */
import { setImmediate as nextTurn } from 'node:timers/promises';
import type { Transaction } from '../db/db.ts';
import { COPY_HEADER, COPY_ITEMS, COPY_TRAILER, ItemRowEncoder } from './item-copy-rows.ts';

/**
 * Rows per INSERT when COPY is not available (PGlite). PGlite runs in this thread: each INSERT
 * holds the event loop while it runs, for a time that grows with its rows, so the chunks are
 * small and the loop gets a turn after each.
 */
const INSERT_CHUNK = 2_500;

/** The COPY data of the items: header, rows, trailer. */
function* copyData(operationId: string, itemIds: readonly string[], firstOrdinal: number): Generator<Buffer> {
  yield COPY_HEADER;
  yield* new ItemRowEncoder(operationId).rows(itemIds, firstOrdinal);
  yield COPY_TRAILER;
}

/**
 * Inserts the items of a new operation as pending rows, ordinals from `firstOrdinal`.
 * Streams with COPY where the engine has it; otherwise INSERT … SELECT FROM unnest in chunks.
 */
export async function insertItems(
  tx: Transaction,
  operationId: string,
  itemIds: readonly string[],
  firstOrdinal = 0,
): Promise<void> {
  if (tx.copyIn) {
    await tx.copyIn(COPY_ITEMS, copyData(operationId, itemIds, firstOrdinal));
    return;
  }
  for (let start = 0; start < itemIds.length; start += INSERT_CHUNK) {
    if (start > 0) {
      await nextTurn();
    }
    await tx.query(
      `INSERT INTO assistant_operation_item (operation_id, ordinal, item_id)
       SELECT $1, ($3::int + u.o - 1)::int, u.v FROM unnest($2::text[]) WITH ORDINALITY AS u(v, o)`,
      [operationId, itemIds.slice(start, start + INSERT_CHUNK), firstOrdinal + start],
    );
  }
}
