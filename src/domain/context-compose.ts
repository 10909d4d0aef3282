/**
 * The whole context fragment, within a token budget: the open operations (at most
 * {@link OPERATIONS_SHARE} of the budget, the active one always), then the recited scratchpad
 * in what is left, its oldest open items and facts summarized by count until it fits. Lines are
 * never cut. Tokens are counted by the caller's tokenizer (o200k in opspad), line by line: a
 * newline is a token boundary, so the sum of the lines' counts plus one per newline is never
 * below the count of the joined text.
 */
import {
  entryLines,
  type OpenOperation,
  type OperationSummary,
  orderOperations,
  overflowLine,
  summarizeOperation,
} from './context-render.ts';
import type { OperationThrottle } from './key-limits.ts';
import { type RecitationSelection, renderRecitation } from './recitation.ts';

/** The share of the budget the operations may take when a scratchpad is recited too. */
export const OPERATIONS_SHARE = 0.4;
export const CONTEXT_MAX_TOKENS_DEFAULT = 1500;
/** Below this, not even one operation and a pad header fit. */
export const CONTEXT_MIN_TOKENS = 300;

const OWN_HEADING = 'Operations (manage_assistant_operation: call the action named with the operation_id):';
const OTHERS_HEADING = 'Operations of other conversations (the same calls, always with the operation_id):';
/** Without an operation of its own above it, the heading names the tool and the call itself. */
const OTHERS_ALONE_HEADING =
  'Operations of other conversations (manage_assistant_operation: call the action named with the operation_id):';

export type CountTokens = (text: string) => number;

export interface ComposeInput {
  /** The conversation's open operations as loaded (any order; at most a page of them). */
  operations: readonly OpenOperation[];
  /** Every open operation of the conversation, loaded or not. */
  total: number;
  /** `paused_by` of operations paused before it was kept in their state. */
  pausedBy?: ReadonlyMap<string, string>;
  /** Operations whose work waits on a provider limit now. */
  throttled?: ReadonlyMap<string, OperationThrottle>;
  /** Open operations of the organization's other conversations, when asked for. */
  others?: { operations: readonly OpenOperation[]; total: number };
  recitation: RecitationSelection | null;
  budgetTokens: number;
  count: CountTokens;
}

export interface ComposedContext {
  text: string;
  /** The text's size in the caller's tokens (an upper bound: line by line). */
  tokens: number;
  operations: OperationSummary[];
  other_operations: OperationSummary[];
}

/** Tokens of `lines` joined by newlines, and of the newline before them. */
function cost(count: CountTokens, lines: readonly string[]): number {
  return lines.reduce((sum, line) => sum + count(line) + 1, 0);
}

interface Section {
  lines: string[];
  shown: OperationSummary[];
  tokens: number;
}

/** Operations in order while they fit `room`, with an overflow line for the rest. */
function operationsSection(
  heading: string,
  operations: readonly OpenOperation[],
  total: number,
  firstAlias: number,
  room: number,
  input: ComposeInput,
  other: boolean,
): Section {
  const { count } = input;
  if (total === 0) {
    return { lines: [], shown: [], tokens: 0 };
  }
  const lines = [heading];
  let tokens = cost(count, lines);
  const reserve = cost(count, [overflowLine(total)]);
  const shown: OperationSummary[] = [];
  for (const op of orderOperations(operations)) {
    const summary = summarizeOperation(
      op,
      `#${firstAlias + shown.length}`,
      input.pausedBy?.get(op.id),
      input.throttled?.get(op.id),
    );
    if (other) {
      summary.conversation_id = op.conversation_id;
    }
    const entry = entryLines(op, { ...summary, conversation_id: undefined });
    const entryTokens = cost(count, entry);
    const isLast = shown.length + 1 === total;
    // The conversation's active operation is shown whatever the room: it is what comes next.
    const mustShow = !other && shown.length === 0 && op.status === 'active';
    if (!mustShow && tokens + entryTokens + (isLast ? 0 : reserve) > room) {
      break;
    }
    lines.push(...entry);
    tokens += entryTokens;
    shown.push(summary);
  }
  if (shown.length === 0 && other) {
    return { lines: [], shown: [], tokens: 0 };
  }
  if (shown.length < total) {
    const line = overflowLine(total - shown.length);
    lines.push(line);
    tokens += cost(count, [line]);
  }
  return { lines, shown, tokens };
}

/** The recitation within `room` tokens: the oldest open items and facts go first. */
function padSection(
  selection: RecitationSelection,
  aliases: ReadonlyMap<string, string>,
  room: number,
  count: CountTokens,
) {
  const trim = { open_items: 0, facts: 0 };
  // Each step drops a tenth of the longer list (at least one): O(log n) renders, not O(n).
  for (;;) {
    const text = renderRecitation(selection, aliases, trim);
    const tokens = text ? cost(count, text.split('\n')) : 0;
    const openLeft = selection.open_items.length - trim.open_items;
    const factsLeft = selection.facts.length - trim.facts;
    if (tokens <= room || openLeft + factsLeft === 0) {
      return tokens <= room ? { text, tokens } : { text: '', tokens: 0 };
    }
    if (factsLeft >= openLeft) {
      trim.facts += Math.max(1, Math.ceil(factsLeft / 10));
    } else {
      trim.open_items += Math.max(1, Math.ceil(openLeft / 10));
    }
  }
}

/** `count` remembering each line's count: trimming the pad renders most lines again. */
function memoized(count: CountTokens): CountTokens {
  const known = new Map<string, number>();
  return (text) => {
    let tokens = known.get(text);
    if (tokens === undefined) {
      tokens = count(text);
      known.set(text, tokens);
    }
    return tokens;
  };
}

function recitesAnything(selection: RecitationSelection | null): selection is RecitationSelection {
  if (!selection) {
    return false;
  }
  const { hidden } = selection;
  return (
    selection.goals.length +
      selection.open_items.length +
      selection.facts.length +
      hidden.goals +
      hidden.open_items +
      hidden.facts >
    0
  );
}

export function composeContext(rawInput: ComposeInput): ComposedContext {
  const input = { ...rawInput, count: memoized(rawInput.count) };
  const { count } = input;
  const budget = Math.max(input.budgetTokens, CONTEXT_MIN_TOKENS);
  const hasPad = recitesAnything(input.recitation);
  const opsRoom = hasPad ? Math.floor(budget * OPERATIONS_SHARE) : budget;

  const own = operationsSection(OWN_HEADING, input.operations, input.total, 1, opsRoom, input, false);
  const others = input.others
    ? operationsSection(
        own.lines.length > 0 ? OTHERS_HEADING : OTHERS_ALONE_HEADING,
        input.others.operations,
        input.others.total,
        own.shown.length + 1,
        opsRoom - own.tokens,
        input,
        true,
      )
    : { lines: [], shown: [], tokens: 0 };

  const aliases = new Map(own.shown.map((op) => [op.operation_id, op.alias as string]));
  const used = own.tokens + others.tokens;
  const pad = hasPad ? padSection(input.recitation as RecitationSelection, aliases, budget - used, count) : null;

  const parts = [own.lines.join('\n'), others.lines.join('\n'), pad?.text ?? ''].filter((part) => part !== '');
  return {
    text: parts.join('\n'),
    tokens: used + (pad?.tokens ?? 0),
    operations: own.shown,
    other_operations: others.shown,
  };
}
