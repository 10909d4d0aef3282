/**
 * Inputs that change the structured scratchpad: the `update_scratchpad` tool (add, remove or
 * replace entries) and the REST write of a whole pad, plus the per-pad settings, validated like
 * the reference (clear errors for wrong types and negatives).
 */
import { z } from 'zod';
import { MAX_PAD_ENTRIES, type Pad, PadFact, PadInput, PadItem, PadRef } from './scratchpad.ts';
import { checkJsonTextBytes } from './size-limits.ts';

const version = z.number().int().min(0, 'must be 0 or more');
const texts = z.array(z.string().min(1)).max(MAX_PAD_ENTRIES);

const Sections = {
  goals: z.array(PadItem).max(MAX_PAD_ENTRIES).nullish(),
  open_items: z.array(PadItem).max(MAX_PAD_ENTRIES).nullish(),
  facts: z.array(PadFact).max(MAX_PAD_ENTRIES).nullish(),
  refs: z.array(PadRef).max(MAX_PAD_ENTRIES).nullish(),
};

export const UpdateScratchpadInput = z.strictObject({
  expected_version: version
    .nullish()
    .describe('The version you last read; the write is refused (409) if the pad changed since. Omit to write anyway.'),
  task: z
    .string()
    .min(1)
    .max(2000)
    .nullish()
    .describe("The conversation's task: becomes the first goal and the user:initial ref when the pad has no goal."),
  add: z
    .strictObject(Sections)
    .nullish()
    .describe('Entries to append. Facts must cite a ref (add the ref in the same call if it is new).'),
  remove: z
    .strictObject({
      goals: texts.nullish(),
      open_items: texts.nullish(),
      facts: texts.nullish(),
      refs: texts.nullish().describe('Ref ids.'),
    })
    .nullish()
    .describe('Entries to remove, by exact text (refs by id), e.g. open items that are done.'),
  replace: z.strictObject(Sections).nullish().describe('Sections to replace whole.'),
  reason: z.string().min(1).max(500).nullish().describe('Why, for the version history.'),
});
export type UpdateScratchpadInput = z.infer<typeof UpdateScratchpadInput>;

/** Applies replace, then remove, then add, to `pad`. Citations are checked by the store. */
export function applyUpdate(pad: Pad, input: UpdateScratchpadInput): Pad {
  const next: Pad = { ...pad };
  for (const section of ['goals', 'open_items', 'facts', 'refs'] as const) {
    const replacement = input.replace?.[section];
    if (replacement) {
      (next as Record<typeof section, unknown>)[section] = replacement;
    }
  }
  const drop = <T>(items: T[], keys: readonly string[] | null | undefined, key: (item: T) => string): T[] => {
    if (!keys || keys.length === 0) {
      return items;
    }
    const remove = new Set(keys);
    return items.filter((item) => !remove.has(key(item)));
  };
  next.goals = drop(next.goals, input.remove?.goals, (i) => i.text);
  next.open_items = drop(next.open_items, input.remove?.open_items, (i) => i.text);
  next.facts = drop(next.facts, input.remove?.facts, (i) => i.text);
  next.refs = drop(next.refs, input.remove?.refs, (r) => r.id);
  next.goals = [...next.goals, ...(input.add?.goals ?? [])];
  next.open_items = [...next.open_items, ...(input.add?.open_items ?? [])];
  next.facts = [...next.facts, ...(input.add?.facts ?? [])];
  // A ref added again under an existing id replaces it, rather than duplicating it.
  const added = input.add?.refs ?? [];
  const addedIds = new Set(added.map((r) => r.id));
  next.refs = [...next.refs.filter((r) => !addedIds.has(r.id)), ...added];
  return next;
}

/** `PUT /v1/conversations/:id/scratchpad`. */
export const PutScratchpadBody = z.strictObject({
  expected_version: version.describe('The version the new pad replaces (0 for the first write).'),
  scratchpad: PadInput,
  task: z.string().min(1).max(2000).nullish(),
  reason: z.string().min(1).max(500).nullish(),
});

/** Per-pad options, validated as the reference validates its own. */
export const PadSettingsInput = z.strictObject({
  reorganize_every: z
    .number({ error: 'must be a non-negative integer (0 turns the cadence off)' })
    .int('must be a non-negative integer (0 turns the cadence off)')
    .min(0, 'must be >= 0 (0 turns the cadence off)')
    .optional(),
  schema_retries: z
    .number({ error: 'must be a non-negative integer' })
    .int('must be a non-negative integer')
    .min(0, 'must be >= 0')
    .max(5)
    .optional(),
  max_recent_messages: z
    .number({ error: 'must be a non-negative integer' })
    .int('must be a non-negative integer')
    .min(0, 'must be >= 0')
    .max(100)
    .optional(),
});

/** `POST /v1/conversations/:id/scratchpad/reorganize`. */
export const ReorganizeBody = z.strictObject({
  recent_messages: z
    .array(z.strictObject({ role: z.string().min(1).max(32), content: z.string().max(20_000) }))
    .max(100)
    .optional()
    .describe('The latest messages of the conversation, which the reorganizer may cite as turn:N.'),
  reason: z.string().min(1).max(500).optional(),
});

export const PAD_TOO_LARGE_ADVICE =
  'Remove entries (open items that are done, facts nobody needs) or reorganize the pad (POST /v1/conversations/:id/scratchpad/reorganize) before adding more.';

/**
 * Refuses pad content over OPSPAD_MAX_SCRATCHPAD_BYTES before it is validated entry by entry:
 * what a call adds or replaces must fit in a pad on its own. (The body it came in is at most
 * twice a pad, so serializing it to measure is cheap.) The whole pad is checked when written.
 */
export function checkPadInputSize(raw: unknown, fields: readonly string[], maxBytes: number): void {
  if (raw === null || typeof raw !== 'object') {
    return;
  }
  for (const field of fields) {
    const value = (raw as Record<string, unknown>)[field];
    if (value !== undefined && value !== null) {
      checkJsonTextBytes('scratchpadBytes', field, JSON.stringify(value), maxBytes, PAD_TOO_LARGE_ADVICE);
    }
  }
}
