/**
 * The notes scratchpad: executions, their notes and the trace of every read and write.
 *
 * A note belongs to one scope: an execution (`execution_id` set; deleted when the execution
 * ends) or the conversation itself (`execution_id` null). Persistent notes belong to the
 * conversation (`execution_id` null, `persistent`) and are shown first in every scope.
 *
 * Locking: a tool call in an execution locks the execution row (`FOR UPDATE`) for its whole
 * transaction, and ending an execution locks it too, so a write can never land after the end
 * cleared the notes, and the notes and traces of one execution get ids in the order they
 * happened (which makes trace `seq` stable). Adding a persistent note first takes a
 * transaction advisory lock on the conversation's persistent notes (before the execution row),
 * so two identical notes sent at once are stored once. It is not the conversation row's
 * `FOR UPDATE`: a write holding the execution row takes a key-share lock on the conversation
 * row for its foreign key, and would deadlock with a read holding that row and waiting for the
 * execution. A write to the conversation's own notes (no execution row to lock) takes a
 * transaction advisory lock on that scope at the same point, so the scope's cap holds under
 * concurrent writes.
 *
 * Bounds: a write counts its scope's notes up to the cap (an index range of at most
 * OPSPAD_MAX_NOTES_PER_SCOPE entries); a read fetches every visible note's id and size, then the
 * text of one page of at most OPSPAD_MAX_READ_BYTES (always at least one note).
 */
import { AppError } from '../../domain/errors.ts';
import { type NotesBounds, type NotesPage, pageOfNoteSizes, tooManyNotes } from '../../domain/notes-input.ts';
import type { Database, Queryable } from '../db/db.ts';
import { XACT_LOCK_CLASS } from '../db/lock-keys.ts';
import { type ConversationScope, ensureConversation } from '../tenants/conversation-repo.ts';

export type ExecutionStatus = 'running' | 'ended';

export interface ExecutionRecord {
  id: string;
  conversation_id: string;
  organization_id: string;
  status: ExecutionStatus;
  created_at: Date;
  ended_at: Date | null;
}

export type TraceKind = 'read' | 'write';

export interface TraceRecord {
  seq: number;
  kind: TraceKind;
  notes: string | null;
  at: Date;
}

/** Where a tool call reads and writes: an execution of the conversation, or the conversation. */
export interface NotesScope extends ConversationScope {
  executionId?: string | undefined;
}

/** OPSPAD_MAX_RUNNING_EXECUTIONS's default. */
export const DEFAULT_MAX_RUNNING_EXECUTIONS = 100;

const EXECUTION_COLUMNS = 'id, conversation_id, organization_id, status, created_at, ended_at';

export function executionNotFound(executionId: string, where = ''): AppError {
  return new AppError('not_found', `Execution ${executionId} was not found${where}.`, { execution_id: executionId });
}

function executionEnded(execution: ExecutionRecord): AppError {
  return new AppError(
    'execution_ended',
    `Execution ${execution.id} has ended and its notes were cleared. Start a new execution with POST /v1/conversations/${execution.conversation_id}/executions, or call without the X-Opspad-Execution header to use the conversation's own notes.`,
    { execution_id: execution.id, status: execution.status },
  );
}

/**
 * Starts an execution in the conversation (created on first use), unless it has `maxRunning`
 * running ones (too_many_executions): the conversation's lock makes concurrent starts take
 * turns, and the count reads at most `maxRunning` entries.
 */
export async function createExecution(
  db: Database,
  scope: ConversationScope,
  maxRunning = DEFAULT_MAX_RUNNING_EXECUTIONS,
): Promise<ExecutionRecord> {
  return db.transaction(async (tx) => {
    await ensureConversation(tx, scope, { lock: true });
    const running = await tx.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM (
         SELECT 1 FROM assistant_execution
         WHERE conversation_id = $1 AND organization_id = $2 AND status = 'running'
         LIMIT $3
       ) running`,
      [scope.conversationId, scope.organizationId, maxRunning],
    );
    const held = running[0]?.n ?? 0;
    if (held >= maxRunning) {
      throw new AppError(
        'too_many_executions',
        `This conversation has ${held} running executions, the most allowed (OPSPAD_MAX_RUNNING_EXECUTIONS = ${maxRunning}); none was started. End one (POST /v1/executions/<id>/end) first.`,
        { running: held, limit: { variable: 'OPSPAD_MAX_RUNNING_EXECUTIONS', max: maxRunning, unit: 'executions' } },
      );
    }
    const rows = await tx.query<ExecutionRecord>(
      `INSERT INTO assistant_execution (conversation_id, organization_id) VALUES ($1, $2)
       RETURNING ${EXECUTION_COLUMNS}`,
      [scope.conversationId, scope.organizationId],
    );
    return rows[0] as ExecutionRecord;
  });
}

/**
 * Ends the execution and deletes its notes (persistent notes, which belong to the
 * conversation, stay). Ending an ended execution changes nothing and clears 0 notes.
 */
export async function endExecution(
  db: Database,
  organizationId: string,
  executionId: string,
): Promise<{ execution: ExecutionRecord; clearedNotes: number }> {
  return db.transaction(async (tx) => {
    const rows = await tx.query<ExecutionRecord>(
      `SELECT ${EXECUTION_COLUMNS} FROM assistant_execution WHERE id = $1 AND organization_id = $2 FOR UPDATE`,
      [executionId, organizationId],
    );
    const execution = rows[0];
    if (!execution) {
      throw executionNotFound(executionId);
    }
    if (execution.status === 'ended') {
      return { execution, clearedNotes: 0 };
    }
    const cleared = await tx.query<{ n: number }>(
      `WITH cleared AS (
         DELETE FROM scratchpad_note
         WHERE execution_id = $1 AND organization_id = $2 AND NOT persistent
         RETURNING 1
       )
       SELECT count(*)::int AS n FROM cleared`,
      [executionId, organizationId],
    );
    const ended = await tx.query<ExecutionRecord>(
      `UPDATE assistant_execution SET status = 'ended', ended_at = now()
       WHERE id = $1 AND organization_id = $2
       RETURNING ${EXECUTION_COLUMNS}`,
      [executionId, organizationId],
    );
    return { execution: ended[0] as ExecutionRecord, clearedNotes: cleared[0]?.n ?? 0 };
  });
}

/**
 * A page of the execution's trace, in order: `seq` numbers the reads and writes 1..n within
 * the execution; the page holds those after `afterSeq`, at most `limit`.
 */
export async function listTraces(
  db: Queryable,
  organizationId: string,
  executionId: string,
  { afterSeq, limit }: { afterSeq: number; limit: number },
): Promise<{ traces: TraceRecord[]; hasMore: boolean; prunedAt: Date | null }> {
  const found = await db.query<{ traces_pruned_at: Date | null }>(
    'SELECT traces_pruned_at FROM assistant_execution WHERE id = $1 AND organization_id = $2',
    [executionId, organizationId],
  );
  const execution = found[0];
  if (!execution) {
    throw executionNotFound(executionId);
  }
  const rows = await db.query<TraceRecord>(
    `SELECT seq, kind, notes, at FROM (
       SELECT row_number() OVER (ORDER BY id)::int AS seq, kind, notes, at
       FROM scratchpad_trace
       WHERE execution_id = $1 AND organization_id = $2
     ) numbered
     WHERE seq > $3
     ORDER BY seq
     LIMIT $4`,
    [executionId, organizationId, afterSeq, limit + 1],
  );
  return { traces: rows.slice(0, limit), hasMore: rows.length > limit, prunedAt: execution.traces_pruned_at };
}

/**
 * Checks the execution named by a tool call belongs to the conversation and is running, and
 * locks it for the rest of the transaction. Another organization's or conversation's execution
 * is "not found".
 */
async function lockRunningExecution(tx: Queryable, scope: ConversationScope, executionId: string): Promise<void> {
  const rows = await tx.query<ExecutionRecord>(
    `SELECT ${EXECUTION_COLUMNS} FROM assistant_execution
     WHERE id = $1 AND organization_id = $2 AND conversation_id = $3
     FOR UPDATE`,
    [executionId, scope.organizationId, scope.conversationId],
  );
  const execution = rows[0];
  if (!execution) {
    throw executionNotFound(executionId, ' in this conversation');
  }
  if (execution.status !== 'running') {
    throw executionEnded(execution);
  }
}

async function lockScope(tx: Queryable, namespace: number, scope: NotesScope): Promise<void> {
  await tx.query('SELECT pg_advisory_xact_lock($1::int, hashtext($2::text))', [
    namespace,
    `${scope.organizationId}:${scope.conversationId}`,
  ]);
}

async function openScope(
  tx: Queryable,
  scope: NotesScope,
  { addsPersistent, writes = false }: { addsPersistent: boolean; writes?: boolean },
) {
  await ensureConversation(tx, scope, { lock: false });
  if (addsPersistent) {
    await lockScope(tx, XACT_LOCK_CLASS.persistentNotes, scope);
  }
  if (scope.executionId !== undefined) {
    await lockRunningExecution(tx, scope, scope.executionId);
  } else if (writes) {
    await lockScope(tx, XACT_LOCK_CLASS.conversationNotes, scope);
  }
}

/** The scope's notes (`persistent`: the conversation's persistent ones), counted up to `limit`. */
async function notesHeld(tx: Queryable, scope: NotesScope, persistent: boolean, limit: number): Promise<number> {
  const rows = await tx.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM (
       SELECT 1 FROM scratchpad_note
       WHERE organization_id = $1 AND conversation_id = $2 AND persistent = $3
         AND execution_id IS NOT DISTINCT FROM $4::uuid
       LIMIT $5
     ) held`,
    [scope.organizationId, scope.conversationId, persistent, persistent ? null : (scope.executionId ?? null), limit],
  );
  return rows[0]?.n ?? 0;
}

const VISIBLE_NOTES = `organization_id = $1 AND conversation_id = $2
  AND ((persistent AND execution_id IS NULL)
    OR (NOT persistent AND execution_id IS NOT DISTINCT FROM $3::uuid))`;

/**
 * The page of visible notes (persistent ones first, then the scope's, in write order) after the
 * first `after`, as many as fit `maxBytes`. Sizes come from the row's length word, not its text.
 */
async function visibleNotes(tx: Queryable, scope: NotesScope, after: number, maxBytes: number): Promise<NotesPage> {
  const params = [scope.organizationId, scope.conversationId, scope.executionId ?? null];
  const sized = await tx.query<{ id: number; bytes: number }>(
    `SELECT id, octet_length(text)::int AS bytes FROM scratchpad_note
     WHERE ${VISIBLE_NOTES}
     ORDER BY persistent DESC, id`,
    params,
  );
  const { from, to, nextAfter } = pageOfNoteSizes(
    sized.map((row) => row.bytes),
    after,
    maxBytes,
  );
  const ids = sized.slice(from, to).map((row) => row.id);
  const rows =
    ids.length === 0
      ? []
      : await tx.query<{ text: string }>(
          `SELECT text FROM scratchpad_note
           WHERE ${VISIBLE_NOTES} AND id = ANY($4::bigint[])
           ORDER BY persistent DESC, id`,
          [...params, ids],
        );
  return { notes: rows.map((row) => row.text), after: from, total: sized.length, nextAfter };
}

async function appendTrace(tx: Queryable, scope: NotesScope, kind: TraceKind, notes: string | null): Promise<void> {
  await tx.query(
    `INSERT INTO scratchpad_trace (conversation_id, organization_id, execution_id, kind, notes)
     VALUES ($1, $2, $3, $4, $5)`,
    [scope.conversationId, scope.organizationId, scope.executionId ?? null, kind, notes],
  );
}

/**
 * Adds a note to the scope and traces the write; returns the first page of visible notes when
 * asked. A scope holding `bounds.maxNotes` notes refuses the write (too_many_notes).
 */
export async function writeNote(
  db: Database,
  scope: NotesScope,
  text: string,
  { withHistory, bounds }: { withHistory: boolean; bounds: NotesBounds },
): Promise<NotesPage | null> {
  return db.transaction(async (tx) => {
    await openScope(tx, scope, { addsPersistent: false, writes: true });
    const held = await notesHeld(tx, scope, false, bounds.maxNotes);
    if (held >= bounds.maxNotes) {
      throw tooManyNotes(scope.executionId === undefined ? 'conversation' : 'execution', held, bounds.maxNotes);
    }
    await tx.query(
      `INSERT INTO scratchpad_note (conversation_id, organization_id, execution_id, persistent, text)
       VALUES ($1, $2, $3, false, $4)`,
      [scope.conversationId, scope.organizationId, scope.executionId ?? null, text],
    );
    await appendTrace(tx, scope, 'write', text);
    return withHistory ? await visibleNotes(tx, scope, 0, bounds.readBytes) : null;
  });
}

/**
 * Reads a page of the scope's notes (after the first `after`) and traces the read. A non-empty
 * `persistentNotes` is first added to the conversation's persistent notes, unless an identical
 * one is there already or they hold `bounds.maxNotes` (too_many_notes).
 */
export async function readNotes(
  db: Database,
  scope: NotesScope,
  { persistentNotes, after, bounds }: { persistentNotes: string | null; after: number; bounds: NotesBounds },
): Promise<NotesPage & { persistentAdded: boolean }> {
  const persistent = persistentNotes === null || persistentNotes === '' ? null : persistentNotes;
  return db.transaction(async (tx) => {
    await openScope(tx, scope, { addsPersistent: persistent !== null });
    let persistentAdded = false;
    if (persistent !== null) {
      const added = await tx.query(
        `INSERT INTO scratchpad_note (conversation_id, organization_id, execution_id, persistent, text)
         SELECT $1, $2, NULL, true, $3::text
         WHERE NOT EXISTS (
           SELECT 1 FROM scratchpad_note
           WHERE conversation_id = $1 AND organization_id = $2 AND execution_id IS NULL AND persistent
             AND text = $3::text
         )
         RETURNING id`,
        [scope.conversationId, scope.organizationId, persistent],
      );
      persistentAdded = added.length > 0;
      if (persistentAdded) {
        // Counted after the insert: an identical note already there is no refusal.
        const held = await notesHeld(tx, scope, true, bounds.maxNotes + 1);
        if (held > bounds.maxNotes) {
          throw tooManyNotes('persistent', held - 1, bounds.maxNotes);
        }
      }
    }
    await appendTrace(tx, scope, 'read', persistent);
    return { ...(await visibleNotes(tx, scope, after, bounds.readBytes)), persistentAdded };
  });
}
