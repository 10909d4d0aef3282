/**
 * Recites the structured scratchpad at the tail of the context fragment, within a character
 * budget whatever the pad holds. Goals come first (in at most half the room when there are open
 * items or facts); then the newest open items and facts that fit
 * (older ones are summarized by count, never cut mid-line); then the refs the shown entries cite.
 *
 * A ref is named once: facts are grouped by the ref they cite, named at the head of the group,
 * and `operation:<id>` of an operation the fragment lists as `#1` is written `#1` (its id is in
 * the operation's entry already). The selection is made
 * when the pad is written and stored with it ({@link RecitationSelection}); the text is rendered
 * from it on each turn, with the aliases of the operations shown then. The text depends only on
 * the pad, the budget and those aliases — no clock times — so it is stable between turns and a
 * cached prompt prefix before it survives.
 */
import type { Pad, PadItem, PadRef } from './scratchpad.ts';

export const RECITE_MAX_CHARS_DEFAULT = 4000;

/** The stored form's version: older stored recitations are rendered again from the pad. */
export const RECITATION_FORMAT = 2;

/** What is recited of a pad version: the entries that fit the budget, and what was left out. */
export interface RecitationSelection {
  version: number;
  budget: number;
  /** Length of the text rendered without operation aliases. */
  chars: number;
  goals: PadItem[];
  open_items: PadItem[];
  facts: PadItem[];
  /** The refs the shown entries cite, in pad order. */
  refs: PadRef[];
  hidden: { goals: number; open_items: number; facts: number; refs: number };
}

export interface Recitation {
  text: string;
  chars: number;
  shown: { goals: number; open_items: number; facts: number; refs: number };
  selection: RecitationSelection;
}

const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`;
const flat = (text: string) => text.replace(/\s+/g, ' ').trim();

/** The header, saying once what the short forms in ref ids stand for. */
function headerLine(version: number, usesOperationAlias: boolean, uuidAliases: readonly [string, string][]): string {
  const parts = [
    ...(usesOperationAlias ? ['#n = the id of operation #n'] : []),
    ...uuidAliases.map(([uuid, alias]) => `${alias} = ${uuid}`),
  ];
  return `Scratchpad v${version}${parts.length > 0 ? ` (in ref ids, ${parts.join('; ')})` : ''}:`;
}

/** What a ref points at, after its id: `(kind: label)`. */
function refNote(ref: PadRef | undefined): string {
  if (!ref) {
    return '';
  }
  const label = flat(ref.label ?? ref.excerpt ?? '');
  const short = label.length > 100 ? `${label.slice(0, 99)}…` : label;
  return ` (${ref.kind}${short ? `: ${short}` : ''})`;
}

const OPERATION_REF = /^operation:([0-9a-f-]{36})$/i;
const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/gi;

/** Which of the oldest shown open items and facts to leave out (to fit a token budget). */
export interface RenderTrim {
  open_items: number;
  facts: number;
}

/**
 * The recitation's text from a selection. Each ref id is written once where it can be: facts
 * that cite the same ref are grouped under it (one fact alone names it inline); a UUID in a ref
 * id (36 characters, 35 tokens) is written as `#n` when the fragment lists that operation as
 * `#n` (`operationAliases`), else as `u1`, `u2`… spelled once in the header; `operation:<id>` of
 * a listed operation is just `#n`. `trim` leaves out that many of the oldest shown open items
 * and facts (counted with the hidden ones).
 */
export function renderRecitation(
  selection: RecitationSelection,
  operationAliases: ReadonlyMap<string, string> = new Map(),
  trim: RenderTrim = { open_items: 0, facts: 0 },
): string {
  const { hidden, goals } = selection;
  const entries = goals.length + selection.open_items.length + selection.facts.length;
  if (entries + hidden.goals + hidden.open_items + hidden.facts === 0) {
    return '';
  }
  const openItems = selection.open_items.slice(trim.open_items);
  const facts = selection.facts.slice(trim.facts);
  const refsById = new Map(selection.refs.map((ref) => [ref.id, ref]));
  let usesOperationAlias = false;
  const uuidAliases = new Map<string, string>();
  const short = (refId: string): string => {
    const listed = OPERATION_REF.exec(refId)?.[1]?.toLowerCase();
    const whole = listed ? operationAliases.get(listed) : undefined;
    if (whole) {
      usesOperationAlias = true;
      return whole;
    }
    return refId.replace(UUID, (found) => {
      const uuid = found.toLowerCase();
      const operation = operationAliases.get(uuid);
      if (operation) {
        usesOperationAlias = true;
        return operation;
      }
      let alias = uuidAliases.get(uuid);
      if (!alias) {
        alias = `u${uuidAliases.size + 1}`;
        uuidAliases.set(uuid, alias);
      }
      return alias;
    });
  };
  const line = (item: PadItem) =>
    item.source_ref ? `- ${flat(item.text)} [${short(item.source_ref)}]` : `- ${flat(item.text)}`;

  const body: string[] = [];
  const section = (title: string, items: PadItem[], hiddenCount: number, word: string) => {
    if (items.length + hiddenCount === 0) {
      return;
    }
    body.push(`${title}:`);
    if (hiddenCount > 0) {
      body.push(`- …${plural(hiddenCount, word)} not shown`);
    }
    body.push(...items.map(line));
  };
  section('Goals', goals, 0, 'goal');
  if (hidden.goals > 0) {
    body.push(`- …and ${plural(hidden.goals, 'more goal')} not shown`);
  }
  section('Open items', openItems, hidden.open_items + trim.open_items, 'older open item');

  // Facts citing a ref no other shown fact cites name it inline; the others are grouped under
  // it, groups in the order of their oldest shown fact, facts in pad order.
  const groups = new Map<string, PadItem[]>();
  for (const fact of facts) {
    const key = fact.source_ref ?? '';
    groups.set(key, [...(groups.get(key) ?? []), fact]);
  }
  const singles = facts.filter((fact) => !fact.source_ref || groups.get(fact.source_ref)?.length === 1);
  const hiddenFacts = hidden.facts + trim.facts;
  if (singles.length > 0 || hiddenFacts > 0) {
    body.push('Facts:');
    if (hiddenFacts > 0) {
      body.push(`- …${plural(hiddenFacts, 'older fact')} not shown`);
    }
    body.push(...singles.map(line));
  }
  for (const [refId, group] of groups) {
    if (refId && group.length > 1) {
      const id = short(refId);
      body.push(`Facts from ${id}${id.startsWith('#') ? '' : refNote(refsById.get(refId))}:`);
      body.push(...group.map((fact) => `- ${flat(fact.text)}`));
    }
  }
  return [headerLine(selection.version, usesOperationAlias, [...uuidAliases]), ...body].join('\n');
}

/**
 * Selects what of `pad` (at `version`) recites within `budget` characters, and renders it.
 * Returns an empty text for an empty pad.
 */
export function recitePad(pad: Pad, version: number, budget = RECITE_MAX_CHARS_DEFAULT): Recitation {
  const none = { goals: 0, open_items: 0, facts: 0, refs: 0 };
  const emptySelection: RecitationSelection = {
    version,
    budget,
    chars: 0,
    goals: [],
    open_items: [],
    facts: [],
    refs: [],
    hidden: none,
  };
  if (pad.goals.length + pad.open_items.length + pad.facts.length === 0) {
    return { text: '', chars: 0, shown: none, selection: emptySelection };
  }
  // Every fixed line that may appear, so the greedy fill never overshoots.
  const fixed =
    headerLine(version, true, []).length +
    ' (in ref ids, )'.length +
    ['Goals:', 'Open items:', 'Facts:'].join('\n').length +
    2 +
    4 * 50; // the overflow lines
  let room = budget - fixed;

  const refsById = new Map(pad.refs.map((ref) => [ref.id, ref]));
  const cited = new Set<string>();
  const grouped = new Set<string>();
  const uuids = new Set<string>();
  // Upper bounds of what the render writes: a ref id's UUIDs become aliases (each spelled once
  // in the header), a fact names its ref once (a group heading, or inline when alone).
  const refCost = (refId: string) => {
    let extra = 0;
    const shortened = refId.replace(UUID, (found) => {
      if (!uuids.has(found.toLowerCase())) {
        extra += found.length + 8;
      }
      return `u${uuids.size + 1}`;
    });
    return shortened.length + extra;
  };
  const cost = (item: PadItem, isFact: boolean) => {
    const text = flat(item.text).length + 3;
    if (!item.source_ref) {
      return text;
    }
    if (!isFact) {
      return text + refCost(item.source_ref) + 3;
    }
    return grouped.has(item.source_ref)
      ? text + 1
      : text + refCost(item.source_ref) + refNote(refsById.get(item.source_ref)).length + 14;
  };
  /** Takes `item` if it fits in the room, keeping `reserve` characters free for others. */
  const take = (item: PadItem, isFact = false, reserve = 0): boolean => {
    const needed = cost(item, isFact);
    if (needed > room - reserve) {
      return false;
    }
    room -= needed;
    if (item.source_ref) {
      for (const found of item.source_ref.match(UUID) ?? []) {
        uuids.add(found.toLowerCase());
      }
      if (isFact) {
        grouped.add(item.source_ref);
      }
      if (refsById.has(item.source_ref)) {
        cited.add(item.source_ref);
      }
    }
    return true;
  };

  const goals: PadItem[] = [];
  // Goals get at most half the room when there are open items or facts, so a pad with
  // thousands of goals still recites its newest open items and facts.
  const reserveForOthers = pad.open_items.length + pad.facts.length > 0 ? Math.floor(room / 2) : 0;
  for (const goal of pad.goals) {
    if (!take(goal, false, reserveForOthers)) {
      break;
    }
    goals.push(goal);
  }
  // Newest first, alternating, so neither section starves the other.
  const openItems: PadItem[] = [];
  const facts: PadItem[] = [];
  let o = pad.open_items.length - 1;
  let f = pad.facts.length - 1;
  let openFull = false;
  let factsFull = false;
  while ((!openFull && o >= 0) || (!factsFull && f >= 0)) {
    if (!openFull && o >= 0) {
      if (take(pad.open_items[o] as PadItem)) {
        openItems.unshift(pad.open_items[o] as PadItem);
        o--;
      } else {
        openFull = true;
      }
    }
    if (!factsFull && f >= 0) {
      if (take(pad.facts[f] as PadItem, true)) {
        facts.unshift(pad.facts[f] as PadItem);
        f--;
      } else {
        factsFull = true;
      }
    }
  }
  const refs = pad.refs.filter((ref) => cited.has(ref.id));
  const selection: RecitationSelection = {
    version,
    budget,
    chars: 0,
    goals,
    open_items: openItems,
    facts,
    refs,
    hidden: {
      goals: pad.goals.length - goals.length,
      open_items: pad.open_items.length - openItems.length,
      facts: pad.facts.length - facts.length,
      refs: pad.refs.length - refs.length,
    },
  };
  const text = renderRecitation(selection);
  selection.chars = text.length;
  return {
    text,
    chars: text.length,
    shown: { goals: goals.length, open_items: openItems.length, facts: facts.length, refs: refs.length },
    selection,
  };
}
