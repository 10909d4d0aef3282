/**
 * The notes scratchpad tools, `write_to_scratchpad` and `read_from_scratchpad`: a model's
 * running notes for one execution (the `X-Opspad-Execution` header; cleared when it ends) or
 * for the conversation (no header), plus persistent notes shown in every scope. Every call is
 * traced. The answer's `result` is the text a model reads.
 */
import {
  checkNoteInputSizes,
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

export async function executeWriteToScratchpad(
  db: Database,
  ctx: ToolCallContext,
  raw: unknown,
  maxNoteBytes = DEFAULT_NOTE_BYTES,
): Promise<ToolResult> {
  const input = parseOrThrow(WriteToScratchpadInput, raw);
  checkNoteInputSizes(input, maxNoteBytes);
  const history = wantsHistory(input);
  const view = await writeNote(db, notesScope(ctx), input.notes, { withHistory: history });
  return {
    result: writeResultText(input.notes, view?.notes ?? null),
    ...scopeFields(ctx),
    ...(view ? { note_count: view.notes.length } : {}),
  };
}

export async function executeReadFromScratchpad(
  db: Database,
  ctx: ToolCallContext,
  raw: unknown,
  maxNoteBytes = DEFAULT_NOTE_BYTES,
): Promise<ToolResult> {
  const input = parseOrThrow(ReadFromScratchpadInput, raw);
  checkNoteInputSizes(input, maxNoteBytes);
  const view = await readNotes(db, notesScope(ctx), input.persistent_notes ?? null);
  return {
    result: readResultText(view.notes),
    ...scopeFields(ctx),
    note_count: view.notes.length,
    persistent_note_added: view.persistentAdded,
  };
}
