/**
 * `GET /v1/operations/:operationId/results`: every item's outcome as one file, JSON Lines or
 * CSV, streamed in item order. Memory stays constant whatever the operation's size: one keyset
 * page of rows is read at a time, written out, and the next page is read only once the socket
 * has taken the last one (a slow client slows the reads instead of filling the heap).
 *
 * The pages are separate reads, not one snapshot: an item recorded while the file is streamed
 * shows whichever outcome it had when its page was read, and each item appears exactly once.
 * A file holds one of the key's OPSPAD_MAX_STREAMS_PER_KEY slots while it streams, as an event
 * stream does: a key cannot keep more of them reading the database at once.
 */
import { once } from 'node:events';
import type { Response } from 'express';
import {
  type ItemResult,
  RESULT_MEDIA_TYPES,
  type ResultFormat,
  resultLine,
  resultsPreamble,
} from '../domain/item-results.ts';
import { type Database, getOperationInOrganization, type ItemResultRow, itemResultsPage } from '../store/index.ts';
import type { StreamSlot } from './stream-slots.ts';

/** Rows read per statement: large enough that a million items take a thousand short reads. */
export const RESULTS_PAGE_ROWS = 1000;

export interface ResultsRequest {
  organizationId: string;
  operationId: string;
  format: ResultFormat;
  onlyFailed: boolean;
}

function resultOf(row: ItemResultRow): ItemResult {
  const recorded = row.status === 'completed' || row.status === 'failed' || row.status === 'abandoned';
  return {
    item_id: row.item_id,
    status: row.status,
    reason: row.reason,
    attempts: row.attempts,
    recorded_at: recorded && row.updated_at ? new Date(row.updated_at).toISOString() : null,
  };
}

/** Resolves once `chunk` is written, waiting for `drain` when the socket's buffer is full. */
async function write(res: Response, chunk: string, gone: AbortSignal): Promise<void> {
  if (!res.write(chunk)) {
    await once(res, 'drain', { signal: gone });
  }
}

/**
 * Streams the file; `slot` counts it among the key's long responses (renewed with each page,
 * released by the caller).
 */
export async function streamResults(
  db: Database,
  res: Response,
  slot: StreamSlot,
  request: ResultsRequest,
): Promise<void> {
  // Before any byte is sent, so a wrong or foreign id is a normal JSON 404.
  await getOperationInOrganization(db, request.organizationId, request.operationId);
  const gone = new AbortController();
  const onClose = () => gone.abort();
  res.once('close', onClose);
  res.writeHead(200, {
    'content-type': `${RESULT_MEDIA_TYPES[request.format]}; charset=utf-8`,
    'content-disposition': `attachment; filename="operation-${request.operationId}.${request.format}"`,
    'cache-control': 'no-store',
    'x-accel-buffering': 'no',
  });
  try {
    await write(res, resultsPreamble(request.format), gone.signal);
    let after = -1;
    while (!gone.signal.aborted) {
      const rows = await itemResultsPage(db, {
        organizationId: request.organizationId,
        operationId: request.operationId,
        afterOrdinal: after,
        limit: RESULTS_PAGE_ROWS,
        onlyFailed: request.onlyFailed,
      });
      await slot.renew();
      if (rows.length > 0) {
        await write(res, rows.map((row) => resultLine(request.format, resultOf(row))).join(''), gone.signal);
        after = rows[rows.length - 1]?.ordinal ?? after;
      }
      if (rows.length < RESULTS_PAGE_ROWS) {
        break;
      }
    }
    res.end();
  } catch (error) {
    // The status line is sent: the only way left to say the file is incomplete is to cut the
    // connection (a client sees the body end without its last chunk, not a short file).
    res.destroy(error instanceof Error ? error : undefined);
  } finally {
    res.off('close', onClose);
  }
}
