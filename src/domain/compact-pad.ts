/**
 * The built-in, deterministic reorganizer: merges duplicates and near duplicates (the newest
 * wording wins), drops entries whose refs are gone, drops refs nothing cites, and keeps the pad
 * small enough to recite in full within the budget (dropping the oldest open items and facts).
 * The same pad always compacts to the same result.
 */
import { recitePad } from './recitation.ts';
import { INITIAL_REF_ID, type Pad, type PadItem } from './scratchpad.ts';

/** Two texts whose word sets overlap at least this much are the same note. */
const NEAR_DUPLICATE = 0.85;

function words(text: string): Set<string> {
  return new Set(
    text
      .toLowerCase()
      .normalize('NFKD')
      .replace(/[^\p{L}\p{N}\s]/gu, ' ')
      .split(/\s+/)
      .filter((w) => w.length > 0),
  );
}

function similarity(a: Set<string>, b: Set<string>): number {
  if (a.size === 0 && b.size === 0) {
    return 1;
  }
  let shared = 0;
  for (const word of a) {
    if (b.has(word)) {
      shared++;
    }
  }
  return shared / (a.size + b.size - shared);
}

/**
 * Keeps the last of each group of (near) duplicates, in list order. Exact duplicates (same
 * words, same source) are found by key; near duplicates are compared only within a bounded
 * window of recent survivors, so this stays fast on thousands of entries.
 */
function dedupe<T extends PadItem>(items: readonly T[]): T[] {
  const WINDOW = 200;
  const kept: { item: T; words: Set<string>; key: string }[] = [];
  const byKey = new Map<string, number>();
  for (let i = items.length - 1; i >= 0; i--) {
    const item = items[i] as T;
    const w = words(item.text);
    const key = `${[...w].sort().join(' ')}|${item.source_ref ?? ''}`;
    if (byKey.has(key)) {
      continue;
    }
    const recent = kept.slice(-WINDOW);
    if (
      recent.some(
        (k) => (k.item.source_ref ?? '') === (item.source_ref ?? '') && similarity(k.words, w) >= NEAR_DUPLICATE,
      )
    ) {
      continue;
    }
    byKey.set(key, kept.length);
    kept.push({ item, words: w, key });
  }
  return kept.reverse().map((k) => k.item);
}

export interface Compaction {
  pad: Pad;
  dropped: string[];
}

export function compactPad(pad: Pad, version: number, budget: number): Compaction {
  const dropped: string[] = [];
  const refIds = new Set(pad.refs.map((ref) => ref.id));
  const cited = <T extends PadItem>(section: string, items: readonly T[]) =>
    items.filter((item) => {
      const ok = !item.source_ref || refIds.has(item.source_ref);
      if (!ok) {
        dropped.push(`${section}: "${item.text}" (its ref ${item.source_ref} is gone)`);
      }
      return ok;
    });
  const goals = dedupe(cited('goal', pad.goals));
  let openItems = dedupe(cited('open item', pad.open_items));
  let facts = dedupe(cited('fact', pad.facts));
  const before = pad.goals.length + pad.open_items.length + pad.facts.length;
  const duplicates = before - dropped.length - goals.length - openItems.length - facts.length;
  if (duplicates > 0) {
    dropped.push(`${duplicates} duplicate entries merged`);
  }

  // Oldest first out, until everything recites within the budget.
  const fits = () => {
    const candidate = withRefs({ ...pad, goals, open_items: openItems, facts });
    const recited = recitePad(candidate, version + 1, budget);
    return recited.shown.open_items === openItems.length && recited.shown.facts === facts.length;
  };
  let trimmed = 0;
  while (!fits() && openItems.length + facts.length > 0) {
    // Trim the longer section by a tenth (at least one) per step: logarithmic, not per entry.
    const step = (n: number) => Math.max(1, Math.ceil(n / 10));
    if (facts.length >= openItems.length) {
      const n = step(facts.length);
      facts = facts.slice(n);
      trimmed += n;
    } else {
      const n = step(openItems.length);
      openItems = openItems.slice(n);
      trimmed += n;
    }
  }
  if (trimmed > 0) {
    dropped.push(`${trimmed} oldest open items and facts dropped to fit the recitation budget`);
  }
  return { pad: withRefs({ ...pad, goals, open_items: openItems, facts }), dropped };

  function withRefs(next: Pad): Pad {
    const used = new Set<string>([INITIAL_REF_ID]);
    for (const item of [...next.goals, ...next.open_items, ...next.facts]) {
      if (item.source_ref) {
        used.add(item.source_ref);
      }
    }
    return { ...next, refs: next.refs.filter((ref) => used.has(ref.id)) };
  }
}
