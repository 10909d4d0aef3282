/**
 * The built-in, deterministic reorganizer: merges duplicates and near duplicates (the newest
 * wording wins), drops entries whose refs are gone, drops refs nothing cites, and keeps the pad
 * small enough to recite in full within the budget: the newest open items and facts that the
 * recitation shows are kept, older ones are dropped (the version history keeps them). Goals are
 * never dropped: the recitation gives them at most half its room and counts the rest, so they
 * cannot crowd out every open item and fact. The same pad always compacts to the same result.
 *
 * Cost: linear in the pad, whatever its shape. Near duplicates are found with an index (prefix
 * filtering: two word sets at least 85% alike share one of their rarest words), not by comparing
 * each entry with its neighbours — that took 3.9 s on a pad of 40,000 entries. The work is a
 * generator that yields every {@link STEP_ENTRIES} entries, so a caller on the event loop can
 * let other work run between slices of it ({@link compactPadSteps}); {@link compactPad} runs it
 * whole.
 */
import { recitePad } from './recitation.ts';
import { INITIAL_REF_ID, type Pad, type PadItem } from './scratchpad.ts';

/** Two texts whose word sets overlap at least this much (Jaccard) are the same note. */
const NEAR_DUPLICATE = 0.85;
/** Candidates compared per entry at most: bounds the work when every entry shares its words. */
const MAX_CANDIDATES = 64;
/** Entries handled between two yields: small, so a caller can slice the work by time. */
export const STEP_ENTRIES = 100;
/** Dropped entries named one by one in the result; the rest are counted. */
const MAX_NAMED_DROPS = 20;

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

function overlap(a: ReadonlySet<string>, b: ReadonlySet<string>): number {
  let shared = 0;
  for (const word of a) {
    if (b.has(word)) {
      shared++;
    }
  }
  return shared;
}

/** The fewest shared words two sets need to be near duplicates, given one set's size. */
function minOverlap(size: number): number {
  // The epsilon keeps 0.85 × 20 (17.000000000000004 in floating point) at 17.
  return Math.ceil(NEAR_DUPLICATE * size - 1e-9);
}

interface Kept<T> {
  item: T;
  words: ReadonlySet<string>;
}

/**
 * Keeps the last of each group of (near) duplicates, in list order. Exact duplicates (same words,
 * same source) are found by key. For near duplicates, each entry's words are ordered rarest
 * first, and an entry is compared only with the kept entries of the same source that share a
 * word of its prefix (the first `size - minOverlap(size) + 1` words): any two sets with a
 * Jaccard similarity of at least 85% share such a word.
 */
function* dedupe<T extends PadItem>(items: readonly T[]): Generator<void, T[]> {
  const sets: Set<string>[] = [];
  const frequency = new Map<string, number>();
  for (const [i, item] of items.entries()) {
    const set = words(item.text);
    sets.push(set);
    for (const word of set) {
      frequency.set(word, (frequency.get(word) ?? 0) + 1);
    }
    if (i % STEP_ENTRIES === STEP_ENTRIES - 1) {
      yield;
    }
  }
  const rarestFirst = (a: string, b: string) =>
    (frequency.get(a) ?? 0) - (frequency.get(b) ?? 0) || (a < b ? -1 : a > b ? 1 : 0);

  const kept: Kept<T>[] = [];
  /** The entry that last compared itself with each kept one (a word may list it twice). */
  const visitedBy: number[] = [];
  const keys = new Set<string>();
  /** `source \0 word` → indexes into `kept` of the entries whose prefix holds the word. */
  const index = new Map<string, number[]>();
  for (let i = items.length - 1; i >= 0; i--) {
    if (i % STEP_ENTRIES === 0) {
      yield;
    }
    const item = items[i] as T;
    const set = sets[i] as Set<string>;
    const source = item.source_ref ?? '';
    const ordered = [...set].sort(rarestFirst);
    const key = `${[...ordered].sort().join(' ')}|${source}`;
    if (keys.has(key)) {
      continue;
    }
    const prefix = ordered.slice(0, ordered.length - minOverlap(ordered.length) + 1);
    let compared = 0;
    let duplicate = false;
    search: for (const word of prefix) {
      const postings = index.get(`${source}\u0000${word}`) ?? [];
      // The most recently kept first: the entries nearest this one in the list.
      for (let p = postings.length - 1; p >= 0; p--) {
        const at = postings[p] as number;
        if (visitedBy[at] === i) {
          continue;
        }
        visitedBy[at] = i;
        const other = (kept[at] as Kept<T>).words;
        const small = Math.min(other.size, set.size);
        const large = Math.max(other.size, set.size);
        if (small >= NEAR_DUPLICATE * large - 1e-9) {
          const shared = overlap(set, other);
          if (shared / (set.size + other.size - shared) >= NEAR_DUPLICATE) {
            duplicate = true;
            break search;
          }
        }
        if (++compared >= MAX_CANDIDATES) {
          break search;
        }
      }
    }
    if (duplicate) {
      continue;
    }
    keys.add(key);
    kept.push({ item, words: set });
    for (const word of prefix) {
      const postingKey = `${source}\u0000${word}`;
      const postings = index.get(postingKey);
      if (postings) {
        postings.push(kept.length - 1);
      } else {
        index.set(postingKey, [kept.length - 1]);
      }
    }
  }
  return kept.reverse().map((k) => k.item);
}

export interface Compaction {
  pad: Pad;
  dropped: string[];
}

/** Refs that something in `next` still cites (and the initial task's). */
function withRefs(next: Pad): Pad {
  const used = new Set<string>([INITIAL_REF_ID]);
  for (const section of [next.goals, next.open_items, next.facts]) {
    for (const item of section) {
      if (item.source_ref) {
        used.add(item.source_ref);
      }
    }
  }
  return { ...next, refs: next.refs.filter((ref) => used.has(ref.id)) };
}

/** {@link compactPad} as steps: yields between chunks of work, returns the compaction. */
export function* compactPadSteps(pad: Pad, version: number, budget: number): Generator<void, Compaction> {
  const dropped: string[] = [];
  let unnamed = 0;
  const drop = (what: string) => {
    if (dropped.length < MAX_NAMED_DROPS) {
      dropped.push(what);
    } else {
      unnamed++;
    }
  };
  const refIds = new Set(pad.refs.map((ref) => ref.id));
  const cited = <T extends PadItem>(section: string, items: readonly T[]) =>
    items.filter((item) => {
      const ok = !item.source_ref || refIds.has(item.source_ref);
      if (!ok) {
        drop(`${section}: "${item.text}" (its ref ${item.source_ref} is gone)`);
      }
      return ok;
    });
  const goals = yield* dedupe(cited('goal', pad.goals));
  let openItems = yield* dedupe(cited('open item', pad.open_items));
  let facts = yield* dedupe(cited('fact', pad.facts));
  const gone = dropped.length + unnamed;
  if (unnamed > 0) {
    dropped.push(`…and ${unnamed} more entries whose ref is gone`);
  }
  const before = pad.goals.length + pad.open_items.length + pad.facts.length;
  const duplicates = before - gone - goals.length - openItems.length - facts.length;
  if (duplicates > 0) {
    dropped.push(`${duplicates} duplicate entries merged`);
  }
  yield;

  // Keep what the recitation shows: it fills its room with the newest open items and facts, so
  // what it leaves out is the oldest of each, and without them the same entries fit again.
  const recite = () => recitePad(withRefs({ ...pad, goals, open_items: openItems, facts }), version + 1, budget);
  let recited = recite();
  let trimmed = openItems.length - recited.shown.open_items + facts.length - recited.shown.facts;
  openItems = openItems.slice(openItems.length - recited.shown.open_items);
  facts = facts.slice(facts.length - recited.shown.facts);
  // A safety net, not the usual path: trim a tenth more until everything recites.
  recited = recite();
  while (
    (recited.shown.open_items < openItems.length || recited.shown.facts < facts.length) &&
    openItems.length + facts.length > 0
  ) {
    const step = (n: number) => Math.max(1, Math.ceil(n / 10));
    const n = facts.length >= openItems.length ? step(facts.length) : step(openItems.length);
    if (facts.length >= openItems.length) {
      facts = facts.slice(n);
    } else {
      openItems = openItems.slice(n);
    }
    trimmed += n;
    recited = recite();
  }
  if (trimmed > 0) {
    dropped.push(`${trimmed} oldest open items and facts dropped to fit the recitation budget`);
  }
  return { pad: withRefs({ ...pad, goals, open_items: openItems, facts }), dropped };
}

export function compactPad(pad: Pad, version: number, budget: number): Compaction {
  const steps = compactPadSteps(pad, version, budget);
  for (;;) {
    const step = steps.next();
    if (step.done) {
      return step.value;
    }
  }
}
