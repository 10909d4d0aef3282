/**
 * The structured scratchpad (`opspad.scratchpad.v1`): goals, open items, facts and the source
 * refs they cite. Pure rules only: the schema, normalization (the initial task becomes the first
 * goal and the `user:initial` ref), citation checks, and counts.
 */
import { z } from 'zod';
import { nameLike } from './names.ts';

export const SCRATCHPAD_SCHEMA = 'opspad.scratchpad.v1';
export const INITIAL_REF_ID = 'user:initial';
export const MAX_PAD_ENTRIES = 20_000;

const text = z.string().trim().min(1, 'must not be empty').max(2000, 'must be at most 2000 characters');
const refId = nameLike(
  z.string().trim().min(1, 'must not be empty').max(200, 'must be at most 200 characters'),
).describe('The id of an entry of refs, e.g. "user:initial", "operation:<uuid>", "turn:12".');

export const PadItem = z.strictObject({
  text,
  source_ref: refId.nullish().describe('The ref this item comes from, if any.'),
});
export const PadFact = z.strictObject({
  text,
  source_ref: refId.describe('Every fact cites the ref it comes from.'),
});
export const PadRef = z.strictObject({
  id: refId,
  kind: nameLike(z.string().trim().min(1).max(32)).describe(
    'What the ref points at: user_input, message, operation, item, tool_call, url, document, …',
  ),
  label: z.string().max(500).nullish(),
  excerpt: z.string().max(1000).nullish(),
});

export type PadItem = z.infer<typeof PadItem>;
export type PadFact = z.infer<typeof PadFact>;
export type PadRef = z.infer<typeof PadRef>;

const list = <T extends z.ZodType>(item: T) =>
  z.array(item).max(MAX_PAD_ENTRIES, `must hold at most ${MAX_PAD_ENTRIES} entries`);

/** A pad as clients send it; `schema` may be omitted. */
export const PadInput = z.strictObject({
  schema: z.literal(SCRATCHPAD_SCHEMA).optional(),
  goals: list(PadItem).default([]),
  open_items: list(PadItem).default([]),
  facts: list(PadFact).default([]),
  refs: list(PadRef).default([]),
});

/** What a reorganizer returns: a pad, plus what it dropped (informational). */
export const ReorganizedPad = PadInput.extend({ dropped: z.array(z.string()).optional() });

export interface Pad {
  schema: typeof SCRATCHPAD_SCHEMA;
  goals: PadItem[];
  open_items: PadItem[];
  facts: PadFact[];
  refs: PadRef[];
}

export interface PadCounts {
  goals: number;
  open_items: number;
  facts: number;
  refs: number;
}

export function countsOfPad(pad: Pad): PadCounts {
  return { goals: pad.goals.length, open_items: pad.open_items.length, facts: pad.facts.length, refs: pad.refs.length };
}

export function emptyPad(): Pad {
  return { schema: SCRATCHPAD_SCHEMA, goals: [], open_items: [], facts: [], refs: [] };
}

function excerpt(value: string, limit: number): string {
  const flat = value.replace(/\s+/g, ' ').trim();
  return flat.length <= limit ? flat : `${flat.slice(0, limit - 1)}…`;
}

/**
 * Fills what a pad must have: the schema tag, and — when a task is known — the task as the first
 * goal (if there is none) citing the `user:initial` ref (added if missing).
 */
export function normalizePad(input: z.input<typeof PadInput> | Pad, task?: string | null): Pad {
  return completePad(PadInput.parse(input), task);
}

/**
 * {@link normalizePad} for sections already validated (a parsed request, a stored pad, their
 * combination): no second pass over every entry. The entry counts are checked when the pad is
 * written ({@link entryCountIssues}).
 */
export function completePad(sections: Omit<Pad, 'schema'>, task?: string | null): Pad {
  const pad: Pad = {
    schema: SCRATCHPAD_SCHEMA,
    goals: sections.goals,
    open_items: sections.open_items,
    facts: sections.facts,
    refs: sections.refs,
  };
  const taskText = task?.trim();
  if (taskText) {
    if (!pad.refs.some((ref) => ref.id === INITIAL_REF_ID)) {
      pad.refs = [
        { id: INITIAL_REF_ID, kind: 'user_input', label: 'Initial task', excerpt: excerpt(taskText, 200) },
        ...pad.refs,
      ];
    }
    if (pad.goals.length === 0) {
      pad.goals = [{ text: excerpt(taskText, 2000), source_ref: INITIAL_REF_ID }];
    }
  }
  return pad;
}

export interface PadIssue {
  field: string;
  message: string;
}

/**
 * Citation rules: ref ids are unique, every fact cites a ref of the pad, and a goal or open item
 * that cites one cites a ref of the pad. With `allowedRefIds`, every ref must also be among them
 * (a reorganizer may not invent sources).
 */
export function citationIssues(pad: Pad, allowedRefIds?: ReadonlySet<string>): PadIssue[] {
  const issues: PadIssue[] = [];
  const ids = new Set<string>();
  pad.refs.forEach((ref, index) => {
    if (ids.has(ref.id)) {
      issues.push({ field: `refs[${index}].id`, message: `duplicate ref id "${ref.id}"` });
    }
    ids.add(ref.id);
    if (allowedRefIds && !allowedRefIds.has(ref.id)) {
      issues.push({ field: `refs[${index}].id`, message: `unknown source ref "${ref.id}"` });
    }
  });
  const check = (section: 'goals' | 'open_items' | 'facts', items: readonly { source_ref?: string | null }[]) => {
    items.forEach((item, index) => {
      if (item.source_ref && !ids.has(item.source_ref)) {
        issues.push({
          field: `${section}[${index}].source_ref`,
          message: `cites "${item.source_ref}", which is not in refs: add the ref or cite another`,
        });
      }
    });
  };
  check('goals', pad.goals);
  check('open_items', pad.open_items);
  check('facts', pad.facts);
  return issues;
}

/** Sections over {@link MAX_PAD_ENTRIES} (an update can add to a pad that is nearly full). */
export function entryCountIssues(pad: Pad): PadIssue[] {
  return (['goals', 'open_items', 'facts', 'refs'] as const).flatMap((section) =>
    pad[section].length > MAX_PAD_ENTRIES
      ? [
          {
            field: section,
            message: `would hold ${pad[section].length} entries; at most ${MAX_PAD_ENTRIES}: remove some (or reorganize the pad) first`,
          },
        ]
      : [],
  );
}

/** Refs that point at opspad's own records, which must exist in the conversation. */
export function recordRefTarget(
  ref: PadRef,
): { kind: 'operation'; operationId: string } | { kind: 'item'; operationId: string; itemId: string } | null {
  const operation = /^operation:([0-9a-f-]{36})$/i.exec(ref.id);
  if (ref.kind === 'operation') {
    return operation?.[1] ? { kind: 'operation', operationId: operation[1].toLowerCase() } : null;
  }
  const item = /^item:([0-9a-f-]{36}):(.+)$/i.exec(ref.id);
  if (ref.kind === 'item') {
    return item?.[1] && item[2] ? { kind: 'item', operationId: item[1].toLowerCase(), itemId: item[2] } : null;
  }
  return null;
}

/** Record refs with a malformed id: `operation:<uuid>` and `item:<operation uuid>:<item id>`. */
export function recordRefIssues(pad: Pad): PadIssue[] {
  const issues: PadIssue[] = [];
  pad.refs.forEach((ref, index) => {
    if ((ref.kind === 'operation' || ref.kind === 'item') && recordRefTarget(ref) === null) {
      issues.push({
        field: `refs[${index}].id`,
        message:
          ref.kind === 'operation'
            ? 'a ref of kind "operation" must have the id "operation:<operation_id>"'
            : 'a ref of kind "item" must have the id "item:<operation_id>:<item_id>"',
      });
    }
  });
  return issues;
}

/** Refs for the last `limit` messages of a conversation, as a reorganizer may cite them. */
export function messageRefs(messages: readonly { role: string; content: string }[], limit: number): PadRef[] {
  const start = Math.max(0, messages.length - limit);
  return messages.slice(start).flatMap((message, offset) => {
    const label = excerpt(message.content, 200);
    return label ? [{ id: `turn:${start + offset + 1}`, kind: message.role || 'message', label }] : [];
  });
}

/** Merges ref lists by id, first occurrence wins. */
export function mergeRefs(...lists: readonly (readonly PadRef[])[]): PadRef[] {
  const seen = new Set<string>();
  const merged: PadRef[] = [];
  for (const ref of lists.flat()) {
    if (!seen.has(ref.id)) {
      seen.add(ref.id);
      merged.push(ref);
    }
  }
  return merged;
}
