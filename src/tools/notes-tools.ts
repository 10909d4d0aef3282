/**
 * The notes scratchpad tools, `write_to_scratchpad` and `read_from_scratchpad`: a model's
 * running notes for one execution (the `X-Opspad-Execution` header; cleared when it ends) or
 * for the conversation (no header), plus persistent notes shown in every scope. Every call is
 * traced. The answer's `result` is the text a model reads.
 */
import {
  checkNoteInputSizes,
  DEFAULT_NOTES_BOUNDS,
  type NotesBounds,
  READ_TOOL_NAME,
  ReadFromScratchpadInput,
  readResultText,
  WRITE_TOOL_NAME,
  WriteToScratchpadInput,
  wantsHistory,
  writeResultText,
} from '../domain/notes-input.ts';
import { DEFAULT_SIZE_LIMITS } from '../domain/size-limits.ts';
import { parseOrThrow } from '../domain/validation.ts';
import { type Database, type NotesScope, readNotes, writeNote } from '../store/index.ts';
import type { ToolCallContext, ToolResult } from './operation-tool.ts';

export { READ_TOOL_NAME, WRITE_TOOL_NAME };

function notesScope(ctx: ToolCallContext): NotesScope {
  return { ...ctx.scope, executionId: ctx.executionId };
}

function scopeFields(ctx: ToolCallContext) {
  return { scope: ctx.executionId === undefined ? 'conversation' : 'execution', execution_id: ctx.executionId ?? null };
}

/** OPSPAD_MAX_NOTE_BYTES, unless the caller says otherwise. */
const DEFAULT_NOTE_BYTES = DEFAULT_SIZE_LIMITS.noteBytes;

/** What the notes tools need beside the database: the note size and the scope's bounds. */
export interface NotesToolDeps {
  /** OPSPAD_MAX_NOTES_PER_SCOPE and OPSPAD_MAX_READ_BYTES; unset: their defaults. */
  notesBounds?: NotesBounds;
}

export async function executeWriteToScratchpad(
  db: Database,
  ctx: ToolCallContext,
  raw: unknown,
  maxNoteBytes = DEFAULT_NOTE_BYTES,
  bounds = DEFAULT_NOTES_BOUNDS,
): Promise<ToolResult> {
  const input = parseOrThrow(WriteToScratchpadInput, raw);
  checkNoteInputSizes(input, maxNoteBytes);
  const history = wantsHistory(input);
  const page = await writeNote(db, notesScope(ctx), input.notes, { withHistory: history, bounds });
  return {
    result: writeResultText(input.notes, page),
    ...scopeFields(ctx),
    ...(page ? { note_count: page.total, next_after: page.nextAfter } : {}),
  };
}

export async function executeReadFromScratchpad(
  db: Database,
  ctx: ToolCallContext,
  raw: unknown,
  maxNoteBytes = DEFAULT_NOTE_BYTES,
  bounds = DEFAULT_NOTES_BOUNDS,
): Promise<ToolResult> {
  const input = parseOrThrow(ReadFromScratchpadInput, raw);
  checkNoteInputSizes(input, maxNoteBytes);
  const page = await readNotes(db, notesScope(ctx), {
    persistentNotes: input.persistent_notes ?? null,
    after: input.after ?? 0,
    bounds,
  });
  return {
    result: readResultText(page),
    ...scopeFields(ctx),
    note_count: page.total,
    next_after: page.nextAfter,
    persistent_note_added: page.persistentAdded,
  };
}
