/**
 * The records of context renders (what each render told the assistant: pad version, size,
 * hash), written together. Every context read ends with one; written one by one they were half
 * of the statements and commits of an assistant's turns. Here a record waits for the write in
 * progress, if any, and the records that waited go in as one multi-row INSERT: one statement and
 * one commit for all the reads in flight, none added when reads come one at a time. A read still
 * answers only once its record is committed.
 *
 * A batch that fails (a conversation deleted between its read and the write) is written again
 * row by row, so one tenant's row never fails another's read.
 *
 * Lock order: none (appends; the foreign key takes the conversation row's key share). Cost: one
 * statement per batch, O(batch), at most {@link MAX_BATCH} rows.
 */
import type { ConversationScope } from './conversation-repo.ts';
import type { Queryable } from './db.ts';
import { prepared } from './prepared.ts';

export interface ContextRender {
  padVersion: number;
  chars: number;
  sha256: string;
}

interface Pending {
  scope: ConversationScope;
  render: ContextRender;
  resolve(): void;
  reject(error: unknown): void;
}

/** Rows of one INSERT at most: the statement's parameters stay a few tens of kilobytes. */
const MAX_BATCH = 256;

const INSERT_RENDERS =
  prepared(`INSERT INTO context_render (conversation_id, organization_id, pad_version, chars, sha256)
  SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::int[], $4::int[], $5::text[])`);

class RenderLog {
  private queued: Pending[] = [];
  private writing = false;

  constructor(private readonly db: Queryable) {}

  record(scope: ConversationScope, render: ContextRender): Promise<void> {
    return new Promise((resolve, reject) => {
      this.queued.push({ scope, render, resolve, reject });
      if (!this.writing) {
        void this.writeQueued();
      }
    });
  }

  private async writeQueued(): Promise<void> {
    this.writing = true;
    try {
      while (this.queued.length > 0) {
        const batch = this.queued.splice(0, MAX_BATCH);
        await this.write(batch);
      }
    } finally {
      this.writing = false;
    }
  }

  private async write(batch: Pending[]): Promise<void> {
    try {
      await insertRenders(this.db, batch);
      for (const entry of batch) {
        entry.resolve();
      }
    } catch (error) {
      if (batch.length === 1) {
        batch[0]?.reject(error);
        return;
      }
      for (const entry of batch) {
        await insertRenders(this.db, [entry]).then(entry.resolve, entry.reject);
      }
    }
  }
}

function insertRenders(db: Queryable, batch: readonly Pending[]): Promise<unknown> {
  return db.query(INSERT_RENDERS, [
    batch.map((e) => e.scope.conversationId),
    batch.map((e) => e.scope.organizationId),
    batch.map((e) => e.render.padVersion),
    batch.map((e) => e.render.chars),
    batch.map((e) => e.render.sha256),
  ]);
}

/** One log per database handle: the reads of a process share its batches. */
const logs = new WeakMap<Queryable, RenderLog>();

/** Remembers what a context render told the assistant; resolves once it is committed. */
export function recordContextRender(db: Queryable, scope: ConversationScope, render: ContextRender): Promise<void> {
  let log = logs.get(db);
  if (!log) {
    log = new RenderLog(db);
    logs.set(db, log);
  }
  return log.record(scope, render);
}
