/**
 * A create's items written in one piece (the ids already in memory): COPY where the engine has
 * it, chunked INSERTs on PGlite; and the COPY text both this and the streamed create
 * (item-copy.ts) write. Cost: O(ids), a few round trips per 100,000 rows.
 */
import { setImmediate as nextTurn } from 'node:timers/promises';
import type { Transaction } from './db.ts';

/**
 * Rows per INSERT when COPY is not available (PGlite). PGlite runs in this thread: each INSERT
 * holds the event loop while it runs (10,000 rows took 150 ms on a loaded 2-core machine, a
 * million rows 10 s in one piece), so the chunks are small and the loop gets a turn after each.
 */
const INSERT_CHUNK = 2_500;
/** Characters per COPY write: a few rows per write would cost a syscall each. */
export const COPY_CHUNK_CHARS = 256 * 1024;

/** The COPY statement of a create's items (its rows: operation id, ordinal, item id). */
export const COPY_ITEMS = 'COPY assistant_operation_item (operation_id, ordinal, item_id) FROM STDIN';

const NEEDS_ESCAPE = /[\\\t\n\r]/;

/** Escapes a value for Postgres' COPY text format. */
export function copyText(value: string): string {
  return !NEEDS_ESCAPE.test(value)
    ? value
    : value.replace(/[\\\t\n\r]/g, (c) => (c === '\\' ? '\\\\' : c === '\t' ? '\\t' : c === '\n' ? '\\n' : '\\r'));
}

function* copyChunks(operationId: string, itemIds: readonly string[], firstOrdinal: number) {
  let chunk = '';
  for (let i = 0; i < itemIds.length; i++) {
    chunk += `${operationId}\t${firstOrdinal + i}\t${copyText(itemIds[i] as string)}\n`;
    if (chunk.length >= COPY_CHUNK_CHARS) {
      yield chunk;
      chunk = '';
    }
  }
  if (chunk.length > 0) {
    yield chunk;
  }
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
    await tx.copyIn(COPY_ITEMS, copyChunks(operationId, itemIds, firstOrdinal));
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
