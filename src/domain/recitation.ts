/**
 * Recites the structured scratchpad at the tail of the context fragment, within a character
 * budget whatever the pad holds. Goals come first (in at most half the room when there are open
 * items or facts); then the newest open items and facts that fit
 * (older ones are summarized by count, never cut mid-line); then the refs the shown entries cite.
 * The text depends only on the pad and the budget — no clock times — so it is stable between
 * turns and a cached prompt prefix before it survives.
 */
import type { Pad, PadItem, PadRef } from './scratchpad.ts';
import { INITIAL_REF_ID } from './scratchpad.ts';

export const RECITE_MAX_CHARS_DEFAULT = 4000;

const INTRO = 'Working memory for this conversation. Use it before deciding the next step; cite source_ref ids.';

function itemLine(item: PadItem): string {
  const flat = item.text.replace(/\s+/g, ' ');
  return item.source_ref ? `- ${flat} [source_ref: ${item.source_ref}]` : `- ${flat}`;
}

function refLine(ref: PadRef): string {
  const label = (ref.label ?? ref.excerpt ?? '').replace(/\s+/g, ' ').trim();
  const short = label.length > 120 ? `${label.slice(0, 119)}…` : label;
  return `- ${ref.id} (${ref.kind})${short ? `: ${short}` : ''}`;
}

const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`;

function header(version: number, chars: number, budget: number): string {
  const fmt = (n: number) => n.toLocaleString('en-US');
  return `## Scratchpad (version ${version}, ${fmt(chars)}/${fmt(budget)} chars)`;
}

export interface Recitation {
  text: string;
  chars: number;
  shown: { goals: number; open_items: number; facts: number; refs: number };
}

/**
 * Renders `pad` (at `version`) within `budget` characters. Returns '' for an empty pad.
 */
export function recitePad(pad: Pad, version: number, budget = RECITE_MAX_CHARS_DEFAULT): Recitation {
  const none = { goals: 0, open_items: 0, facts: 0, refs: 0 };
  if (pad.goals.length + pad.open_items.length + pad.facts.length === 0) {
    return { text: '', chars: 0, shown: none };
  }
  // The header's own length depends on the count it prints; reserve the widest it can be.
  const headerReserve = header(version, budget, budget).length + 1;
  // Every section heading and overflow line that may appear, so the greedy fill never overshoots.
  const fixed =
    [INTRO, '', '### Goals', '', '### Open items', '', '### Facts', '', '### Source refs'].join('\n').length + 1;
  const overflowReserve = 4 * 60;
  let room = budget - headerReserve - fixed - overflowReserve;

  const refsById = new Map(pad.refs.map((ref) => [ref.id, ref]));
  const citedShown = new Set<string>();
  const cost = (line: string) => line.length + 1;
  const refCost = (id: string | null | undefined) => {
    if (!id || citedShown.has(id)) {
      return 0;
    }
    const ref = refsById.get(id);
    return ref ? cost(refLine(ref)) : 0;
  };
  /** Takes `item` if it fits in the room, keeping `reserve` characters free for others. */
  const take = (item: PadItem, reserve = 0): boolean => {
    const needed = cost(itemLine(item)) + refCost(item.source_ref);
    if (needed > room - reserve) {
      return false;
    }
    room -= needed;
    if (item.source_ref && refsById.has(item.source_ref)) {
      citedShown.add(item.source_ref);
    }
    return true;
  };

  // The initial task's ref always shows when present: it anchors the first goal.
  if (refsById.has(INITIAL_REF_ID)) {
    room -= refCost(INITIAL_REF_ID);
    citedShown.add(INITIAL_REF_ID);
  }
  const goals: PadItem[] = [];
  // Goals get at most half the room when there are open items or facts, so a pad with
  // thousands of goals still recites its newest open items and facts.
  const reserveForOthers = pad.open_items.length + pad.facts.length > 0 ? Math.floor(room / 2) : 0;
  for (const goal of pad.goals) {
    if (!take(goal, reserveForOthers)) {
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
      const item = pad.open_items[o] as PadItem;
      if (take(item)) {
        openItems.unshift(item);
        o--;
      } else {
        openFull = true;
      }
    }
    if (!factsFull && f >= 0) {
      const fact = pad.facts[f] as PadItem;
      if (take(fact)) {
        facts.unshift(fact);
        f--;
      } else {
        factsFull = true;
      }
    }
  }

  const lines = [INTRO, '', '### Goals'];
  lines.push(...(goals.length > 0 ? goals.map(itemLine) : ['- (none)']));
  if (goals.length < pad.goals.length) {
    lines.push(`- …and ${plural(pad.goals.length - goals.length, 'more goal')} not shown`);
  }
  lines.push('', '### Open items');
  if (openItems.length < pad.open_items.length) {
    lines.push(`- …${plural(pad.open_items.length - openItems.length, 'older open item')} not shown`);
  }
  lines.push(...(pad.open_items.length > 0 ? openItems.map(itemLine) : ['- (none)']));
  lines.push('', '### Facts');
  if (facts.length < pad.facts.length) {
    lines.push(`- …${plural(pad.facts.length - facts.length, 'older fact')} not shown`);
  }
  lines.push(...(pad.facts.length > 0 ? facts.map(itemLine) : ['- (none)']));
  const shownRefs = pad.refs.filter((ref) => citedShown.has(ref.id));
  lines.push('', '### Source refs');
  lines.push(...(shownRefs.length > 0 ? shownRefs.map(refLine) : ['- (none)']));
  if (shownRefs.length < pad.refs.length) {
    lines.push(`- …${plural(pad.refs.length - shownRefs.length, 'more ref')} not cited above`);
  }
  const body = lines.join('\n');
  let chars = body.length + headerReserve;
  // Two passes settle the header's printed length (it counts itself).
  for (let i = 0; i < 2; i++) {
    chars = header(version, chars, budget).length + 1 + body.length;
  }
  const text = `${header(version, chars, budget)}\n${body}`;
  return {
    text,
    chars: text.length,
    shown: { goals: goals.length, open_items: openItems.length, facts: facts.length, refs: shownRefs.length },
  };
}
