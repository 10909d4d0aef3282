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
  after: z
    .number({ error: 'must be a whole number: the next_after of the previous read' })
    .int('must be a whole number: the next_after of the previous read')
    .min(0, 'must be 0 or more')
    .max(2_147_483_647, 'must be at most 2147483647')
    .nullish()
    .meta({ default: 0 })
    .describe(
      'How many notes were read already: send the next_after of the previous answer to read the next page. Omitted: from the first note.',
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

/** How many notes a scope may hold, and how many bytes of them one read answers. */
export interface NotesBounds {
  /** OPSPAD_MAX_NOTES_PER_SCOPE */
  maxNotes: number;
  /** OPSPAD_MAX_READ_BYTES */
  readBytes: number;
}

export const DEFAULT_NOTES_BOUNDS: NotesBounds = { maxNotes: 1000, readBytes: 256 * 1024 };

/** One page of a scope's visible notes: `after` notes skipped, `total` visible in all. */
export interface NotesPage {
  notes: string[];
  after: number;
  total: number;
  /** The `after` of the next page; null on the last one. */
  nextAfter: number | null;
}

/** What follows a page that is not the last: how to ask for the rest. */
function pageFooter(page: NotesPage): string {
  if (page.nextAfter === null) {
    return '';
  }
  return `\n\n(Notes ${page.after + 1} to ${page.nextAfter} of ${page.total}. Call read_from_scratchpad with {"after": ${page.nextAfter}} for the next ones.)`;
}

/** The answer of a read: a page of the visible notes, persistent ones first. */
export function readResultText(page: NotesPage): string {
  if (page.total === 0) {
    return 'Scratchpad is empty.';
  }
  if (page.notes.length === 0) {
    return `No notes after the first ${page.after}: the scratchpad holds ${page.total}. Read again without "after" to start from the first.`;
  }
  return `Notes from scratchpad:\n${bulleted(page.notes)}${pageFooter(page)}`;
}

/** The answer of a write: the note written, or (with history) the first page of visible notes. */
export function writeResultText(written: string, history: NotesPage | null): string {
  return history === null
    ? `Wrote to scratchpad: ${written}`
    : `Scratchpad updated. Full content:\n${bulleted(history.notes)}${pageFooter(history)}`;
}

/**
 * The page of notes starting after `after`, from each note's size in bytes: as many as fit
 * `maxBytes`, and always at least one, so no note is ever out of reach.
 */
export function pageOfNoteSizes(
  sizes: readonly number[],
  after: number,
  maxBytes: number,
): { from: number; to: number; nextAfter: number | null } {
  const from = Math.min(after, sizes.length);
  let to = from;
  let bytes = 0;
  while (to < sizes.length && (to === from || bytes + (sizes[to] ?? 0) <= maxBytes)) {
    bytes += sizes[to] ?? 0;
    to += 1;
  }
  return { from, to, nextAfter: to < sizes.length ? to : null };
}

/** The refusal of a note its scope has no room for. */
export function tooManyNotes(
  scope: 'execution' | 'conversation' | 'persistent',
  held: number,
  limit: number,
): AppError {
  const where = scope === 'persistent' ? "This conversation's persistent notes" : `The ${scope}'s own notes`;
  const remedy =
    scope === 'execution'
      ? 'End the execution and start a new one, or keep fewer, longer notes'
      : 'Use an execution (X-Opspad-Execution) for running notes, or keep fewer, longer notes';
  return new AppError(
    'too_many_notes',
    `${where} number ${held} already, the most allowed (OPSPAD_MAX_NOTES_PER_SCOPE = ${limit}); nothing was written. ${remedy}.`,
    { scope, held, limit: { variable: 'OPSPAD_MAX_NOTES_PER_SCOPE', max: limit, unit: 'notes' } },
  );
}

/** The deployment's note limit (OPSPAD_MAX_NOTE_BYTES) on a write's or a read's note. */
export function checkNoteInputSizes(
  input: { notes?: string | null; persistent_notes?: string | null },
  maxBytes: number,
): void {
  checkNoteBytes('notes', input.notes, maxBytes);
  checkNoteBytes('persistent_notes', input.persistent_notes, maxBytes);
}
