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

import { batched } from '../db/batched.ts';
import type { Queryable } from '../db/db.ts';
import { prepared } from '../db/prepared.ts';
import type { ConversationScope } from '../tenants/conversation-repo.ts';

export interface ContextRender {
  padVersion: number;
  chars: number;
  sha256: string;
}

/** Rows of one INSERT at most: the statement's parameters stay a few tens of kilobytes. */
const MAX_BATCH = 256;

const INSERT_RENDERS =
  prepared(`INSERT INTO context_render (conversation_id, organization_id, pad_version, chars, sha256)
  SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::int[], $4::int[], $5::text[])`);

/** One INSERT for the renders of a batch (db/batched.ts). */
const recordRenders = batched<{ scope: ConversationScope; render: ContextRender }, void>(async (db, batch) => {
  await db.query(INSERT_RENDERS, [
    batch.map((e) => e.scope.conversationId),
    batch.map((e) => e.scope.organizationId),
    batch.map((e) => e.render.padVersion),
    batch.map((e) => e.render.chars),
    batch.map((e) => e.render.sha256),
  ]);
  return batch.map(() => undefined);
}, MAX_BATCH);

/** Remembers what a context render told the assistant; resolves once it is committed. */
export function recordContextRender(db: Queryable, scope: ConversationScope, render: ContextRender): Promise<void> {
  return recordRenders(db, { scope, render });
}
