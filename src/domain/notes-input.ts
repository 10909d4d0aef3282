/**
 * Input of the notes scratchpad tools, `write_to_scratchpad` and `read_from_scratchpad`, and the
 * text they answer with. The zod schemas validate the calls and generate the JSON Schema handed
 * to models (tools/definitions.ts).
 *
 * As in the operation tool, optional fields accept `null` as "not given": function-calling
 * models in strict mode send null for every field they leave out.
 */
import { z } from 'zod';
import { AppError } from './errors.ts';
import { checkNoteBytes } from './size-limits.ts';

export const WRITE_TOOL_NAME = 'write_to_scratchpad';
export const READ_TOOL_NAME = 'read_from_scratchpad';

/** The longest note a write (or a persistent note) may hold. */
export const MAX_NOTE_LENGTH = 20_000;

const returnHistory = z
  .boolean({ error: 'must be true or false' })
  .nullish()
  .meta({ default: false })
  .describe(
    'true: answer with every note of the scratchpad after this write. false or omitted: answer with the note just written.',
  );

/** `write_to_scratchpad` without its alias. */
export const WriteToScratchpadSchema = z.strictObject({
  notes: z
    .string({ error: 'must be a string: the note to write' })
    .min(1, 'must not be empty')
    .max(MAX_NOTE_LENGTH, `must be at most ${MAX_NOTE_LENGTH} characters`)
    .describe('The note to add: a plan, a finding, a decision, what is left to do. Notes are kept in write order.'),
  return_history: returnHistory,
});

export const WriteToScratchpadInput = WriteToScratchpadSchema.extend({
  /** The reference implementation's name for return_history. */
  include_history: returnHistory.describe(
    'Alias of return_history (the name the reference implementation uses); send one of the two.',
  ),
});
export type WriteToScratchpadInput = z.output<typeof WriteToScratchpadInput>;

export const ReadFromScratchpadInput = z.strictObject({
  persistent_notes: z
    .string({ error: 'must be a string' })
    .max(MAX_NOTE_LENGTH, `must be at most ${MAX_NOTE_LENGTH} characters`)
    .nullish()
    .describe(
      'Optional standing instructions to keep for the whole conversation: added once (an identical note is not added again), shown first in every read and kept when an execution ends.',
    ),
});
export type ReadFromScratchpadInput = z.output<typeof ReadFromScratchpadInput>;

/**
 * Whether a write answers with the whole scratchpad: `return_history`, or its alias
 * `include_history`. Both given with different values is a contradiction, refused.
 */
export function wantsHistory(input: WriteToScratchpadInput): boolean {
  const { return_history: returned, include_history: included } = input;
  if (returned != null && included != null && returned !== included) {
    throw new AppError(
      'validation_failed',
      'Invalid input: include_history: is an alias of return_history and contradicts it; send only return_history.',
      {
        issues: [{ field: 'include_history', message: 'contradicts return_history; send only return_history' }],
        total_issues: 1,
      },
    );
  }
  return returned ?? included ?? false;
}

function bulleted(notes: readonly string[]): string {
  return notes.map((note) => `- ${note}`).join('\n');
}

/** The answer of a read: every visible note, persistent ones first. */
export function readResultText(notes: readonly string[]): string {
  return notes.length === 0 ? 'Scratchpad is empty.' : `Notes from scratchpad:\n${bulleted(notes)}`;
}

/** The answer of a write: the note written, or (with history) every visible note. */
export function writeResultText(written: string, history: readonly string[] | null): string {
  return history === null
    ? `Wrote to scratchpad: ${written}`
    : `Scratchpad updated. Full content:\n${bulleted(history)}`;
}

/** The deployment's note limit (OPSPAD_MAX_NOTE_BYTES) on a write's or a read's note. */
export function checkNoteInputSizes(
  input: { notes?: string | null; persistent_notes?: string | null },
  maxBytes: number,
): void {
  checkNoteBytes('notes', input.notes, maxBytes);
  checkNoteBytes('persistent_notes', input.persistent_notes, maxBytes);
}
