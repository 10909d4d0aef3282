/**
 * A create whose ids stream in: the items are copied into assistant_operation_item (COPY FROM
 * STDIN) while the request body is still being read, and the operation row follows in the same
 * transaction once the body has been read and found valid. Anything wrong anywhere in the body
 * rolls the whole transaction back: nothing is stored.
 *
 * Order inside the transaction: the items first (they carry no foreign key, see
 * schema-operations.ts, and nobody sees them before commit), then insertCreatedOperation's one
 * call — the conversation's lock, the quota, the pause of its active operation, the background
 * limit, the operation row, its event. So the conversation is locked only for that call, not
 * for the upload; concurrent creates in one conversation copy side by side and then take turns.
 * Repeated ids are named as a whole body's create names them (see CopySink).
 *
 * Cost: O(ids) rows through COPY statements of 100,000 rows or 8 MB, each under a savepoint (a
 * few round trips per segment); the process keeps one segment's COPY rows (outside the
 * JavaScript heap), to name repeated ids if the unique index refuses one. Postgres only: PGlite
 * has no COPY FROM STDIN (callers collect the ids and use createOperation).
 */

import type { CopyWriter, Database, Transaction } from '../db/db.ts';
import { isRetryableConflict, isUniqueViolation, UNIQUE_INDEX } from '../db/pg-errors.ts';
import type { ConversationScope } from '../tenants/conversation-repo.ts';
import {
  analyzeAfterLargeCreate,
  type CreatedOperation,
  type CreateOperationParams,
  insertCreatedOperation,
} from './index.ts';
import { COPY_HEADER, COPY_ITEMS, COPY_TRAILER, ItemRowEncoder, KeptRows } from './item-copy-rows.ts';
import { timeOrderedUuid } from './operation-id.ts';

/** Where a streamed create writes its ids, in order. */
export interface ItemSink {
  /** Writes the next ids (resolves when the database can take more). */
  write(ids: readonly string[]): Promise<void>;
  /** Ids written so far. */
  readonly count: number;
}

/** The ids the unique index refused, in the order of their first repeat (at most 21). */
export class RepeatedItemIdError extends Error {
  override readonly name = 'RepeatedItemIdError';
  constructor(readonly itemIds: readonly string[]) {
    super('item ids appear more than once');
  }
}

function isRepeatedItem(error: unknown): boolean {
  return isUniqueViolation(error, UNIQUE_INDEX.itemId);
}

/** Rows per COPY statement: each runs under a savepoint, so a repeated id costs one segment's replay. */
const SEGMENT_ROWS = 100_000;
/**
 * Bytes of rows per COPY statement at most, whatever their count: what a segment keeps in case
 * of a repeated id. 100,000 rows of ids of a dozen characters are about 5 MB; of 512 characters
 * of three bytes each, they would be 157 MB.
 */
const SEGMENT_BYTES = 8 * 1024 * 1024;
/** Rows per INSERT while repeated ids are being named. */
const HUNT_CHUNK = 10_000;
/** Repeated ids named in an error (one more says "and more"). */
const NAMED_REPEATS = 21;

const INSERT_NAMING_REPEATS = `INSERT INTO assistant_operation_item (operation_id, ordinal, item_id)
  SELECT $1, u.o, u.v FROM unnest($2::text[], $3::int[]) AS u(v, o)
  ON CONFLICT (operation_id, item_id) DO NOTHING
  RETURNING ordinal`;

/**
 * Writes ids as COPY rows, one COPY statement (under a savepoint) per {@link SEGMENT_ROWS} or
 * {@link SEGMENT_BYTES}, whichever comes first. When the unique index refuses an id, the segment
 * is rolled back to its savepoint and it, with every id after it, goes in through INSERT … ON
 * CONFLICT DO NOTHING instead: the ids it skips are the repeats, in the order of their first
 * repeat — the answer a whole body gets, which names up to 20. Past that many it only counts.
 * Any other failure: it only counts (the transaction is lost).
 */
class CopySink implements ItemSink {
  count = 0;
  failure: unknown = null;
  readonly repeated: string[] = [];
  private readonly repeatedSet = new Set<string>();
  private naming = false;
  private writer: CopyWriter | null = null;
  /**
   * The current segment's COPY rows as sent, its ids read back from them only if the unique
   * index refuses one. Kept as rows rather than as the id strings: outside the JavaScript heap,
   * and the ids can die as soon as they are encoded (a segment's 100,000 strings otherwise lived
   * long enough to be copied and promoted by the collector, and were swept later).
   */
  private readonly segment = new KeptRows();
  private segmentRows = 0;
  private segmentStart = 0;
  private readonly encoder: ItemRowEncoder;

  constructor(
    private readonly tx: Transaction,
    private readonly operationId: string,
  ) {
    this.encoder = new ItemRowEncoder(operationId);
  }

  async write(ids: readonly string[]): Promise<void> {
    const first = this.count;
    this.count += ids.length;
    if (this.failure !== null) {
      return;
    }
    if (this.naming) {
      await this.nameRepeats(first, ids);
      return;
    }
    const writer = await this.openSegment(first);
    // All of this call's rows are in the segment before the first is sent: a refusal replays them.
    const chunks = [...this.encoder.rows(ids, first)];
    for (const chunk of chunks) {
      this.segment.append(chunk);
    }
    this.segmentRows += ids.length;
    for (const chunk of chunks) {
      try {
        await writer.write(chunk);
      } catch (error) {
        await this.segmentFailed(error);
        return;
      }
    }
    if (this.segmentRows >= SEGMENT_ROWS || this.segment.bytes >= SEGMENT_BYTES) {
      await this.closeSegment();
    }
  }

  /** Ends the last COPY; throws what went wrong (repeated ids as {@link RepeatedItemIdError}). */
  async end(): Promise<void> {
    await this.closeSegment();
    if (this.failure !== null) {
      throw this.failure;
    }
    if (this.repeated.length > 0) {
      throw new RepeatedItemIdError(this.repeated);
    }
  }

  /** Abandons the COPY in progress, if any (the transaction is about to roll back). */
  async abort(): Promise<void> {
    await this.writer?.abort();
    this.writer = null;
  }

  private async openSegment(first: number): Promise<CopyWriter> {
    if (this.writer) {
      return this.writer;
    }
    await this.tx.query('SAVEPOINT item_copy');
    this.segment.clear();
    this.segmentRows = 0;
    this.segmentStart = first;
    this.writer = (this.tx.openCopy as (statement: string) => CopyWriter)(COPY_ITEMS);
    await this.writer.write(COPY_HEADER);
    return this.writer;
  }

  private async closeSegment(): Promise<void> {
    const writer = this.writer;
    if (!writer) {
      return;
    }
    this.writer = null;
    try {
      await writer.write(COPY_TRAILER);
      await writer.end();
      await this.tx.query('RELEASE SAVEPOINT item_copy');
    } catch (error) {
      await this.segmentFailed(error);
    }
  }

  private async segmentFailed(error: unknown): Promise<void> {
    this.writer = null;
    if (!isRepeatedItem(error)) {
      this.failure = error;
      return;
    }
    await this.tx.query('ROLLBACK TO SAVEPOINT item_copy');
    this.naming = true;
    const replay = this.segment.ids();
    this.segment.clear();
    this.segmentRows = 0;
    await this.nameRepeats(this.segmentStart, replay);
  }

  private async nameRepeats(first: number, ids: readonly string[]): Promise<void> {
    for (let start = 0; start < ids.length && this.repeated.length < NAMED_REPEATS; start += HUNT_CHUNK) {
      const chunk = ids.slice(start, start + HUNT_CHUNK);
      const ordinals = chunk.map((_, i) => first + start + i);
      const inserted = await this.tx.query<{ ordinal: number }>(INSERT_NAMING_REPEATS, [
        this.operationId,
        chunk,
        ordinals,
      ]);
      const kept = new Set(inserted.map((row) => row.ordinal));
      for (let i = 0; i < chunk.length && this.repeated.length < NAMED_REPEATS; i++) {
        const id = chunk[i] as string;
        if (!kept.has(ordinals[i] as number) && !this.repeatedSet.has(id)) {
          this.repeatedSet.add(id);
          this.repeated.push(id);
        }
      }
    }
  }
}

/**
 * Creates an operation whose ids `read` writes into the sink as they arrive. `read` reads the
 * whole body, writes the ids (stopping at the first bad one), and returns the create's
 * parameters once everything is checked, or throws the error the request answers with; either
 * way the transaction then commits or rolls back as one. A unique violation of the ids is
 * reported as {@link RepeatedItemIdError} after `read` has returned (bad input comes first).
 */
export async function createOperationFromStream(
  db: Database,
  scope: ConversationScope,
  read: (sink: ItemSink) => Promise<Omit<CreateOperationParams, 'itemIds'>>,
): Promise<CreatedOperation> {
  let started = false;
  let total = 0;
  const created = await db.transaction(async (tx) => {
    if (started) {
      // db.transaction re-runs a transaction that deadlocked, but a body cannot be read twice
      // (the statements after the COPY retry on their own, below).
      throw new Error('a streamed create cannot be run twice');
    }
    started = true;
    if (!tx.openCopy) {
      throw new Error('streamed creates need COPY FROM STDIN (Postgres)');
    }
    const operationId = timeOrderedUuid();
    const sink = new CopySink(tx, operationId);
    let params: Omit<CreateOperationParams, 'itemIds'>;
    try {
      params = await read(sink);
    } catch (error) {
      // The connection may be inside a COPY: end it, or the ROLLBACK would wait behind it forever.
      await sink.abort();
      throw error;
    }
    await sink.end();
    total = sink.count;
    // A deadlock would make db.transaction run everything again, but the body cannot be read
    // twice: the statements after the COPY retry alone, from a savepoint.
    for (let attempt = 1; ; attempt++) {
      await tx.query('SAVEPOINT create_operation');
      try {
        const result = await insertCreatedOperation(tx, scope, params, { count: sink.count, operationId });
        await tx.query('RELEASE SAVEPOINT create_operation');
        return result;
      } catch (error) {
        if (attempt >= 3 || !isRetryableConflict(error)) {
          throw error;
        }
        await tx.query('ROLLBACK TO SAVEPOINT create_operation');
      }
    }
  });
  await analyzeAfterLargeCreate(db, total);
  return created;
}
