/**
 * Statements that take turns and go together: an entry waits for the statement in flight, if
 * any, and the entries that waited go as one statement (at most `maxBatch` of them). An entry
 * alone costs what its statement alone costs; entries in flight together share one round trip
 * (and, for a write, one commit). A batch that fails runs again entry by entry, so one entry's
 * failure (one tenant's row) never fails another's.
 *
 * Used for the context read of every turn (operations/context-reads.ts) and its render record
 * (scratchpads/render-log.ts): half of an assistant's requests each. One queue per database handle: the
 * requests of a process share its batches.
 */
import type { Queryable } from './db.ts';

/** Runs one batch: one result per entry, in the entries' order. */
export type BatchStatement<T, R> = (db: Queryable, entries: readonly T[]) => Promise<readonly R[]>;

interface Pending<T, R> {
  entry: T;
  resolve(result: R): void;
  reject(error: unknown): void;
}

class Batches<T, R> {
  private queued: Pending<T, R>[] = [];
  private running = false;

  constructor(
    private readonly db: Queryable,
    private readonly statement: BatchStatement<T, R>,
    private readonly maxBatch: number,
  ) {}

  add(entry: T): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      this.queued.push({ entry, resolve, reject });
      if (!this.running) {
        void this.runQueued();
      }
    });
  }

  private async runQueued(): Promise<void> {
    this.running = true;
    try {
      while (this.queued.length > 0) {
        await this.run(this.queued.splice(0, this.maxBatch));
      }
    } finally {
      this.running = false;
    }
  }

  private async run(batch: Pending<T, R>[]): Promise<void> {
    try {
      const results = await this.statement(
        this.db,
        batch.map((p) => p.entry),
      );
      for (const [i, p] of batch.entries()) {
        p.resolve(results[i] as R);
      }
    } catch (error) {
      if (batch.length === 1) {
        batch[0]?.reject(error);
        return;
      }
      for (const p of batch) {
        await this.statement(this.db, [p.entry]).then((results) => p.resolve(results[0] as R), p.reject);
      }
    }
  }
}

/** `statement`, batched per database handle as above. */
export function batched<T, R>(
  statement: BatchStatement<T, R>,
  maxBatch: number,
): (db: Queryable, entry: T) => Promise<R> {
  const queues = new WeakMap<Queryable, Batches<T, R>>();
  return (db, entry) => {
    let queue = queues.get(db);
    if (!queue) {
      queue = new Batches(db, statement, maxBatch);
      queues.set(db, queue);
    }
    return queue.add(entry);
  };
}
