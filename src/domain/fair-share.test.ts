/**
 * The fair-share rule: a lone organization uses every slot; once another waits, the slots freed
 * go to the newcomer up to its guarantee, never to the one already above its share; capacity
 * nobody else can use is not kept idle.
 */
import { describe, expect, it } from 'vitest';
import { guaranteedShare, mayStart } from './fair-share.ts';

const state = (slots: number, running: Record<string, number>, waiting: Record<string, number>) => ({
  slots,
  running: new Map(Object.entries(running)),
  waiting: new Map(Object.entries(waiting)),
});

describe('guaranteedShare', () => {
  it('splits the slots evenly, rounding down, and never below one', () => {
    expect(guaranteedShare(8, 1)).toBe(8);
    expect(guaranteedShare(8, 3)).toBe(2);
    expect(guaranteedShare(4, 9)).toBe(1);
    expect(guaranteedShare(4, 0)).toBe(4);
  });
});

describe('mayStart', () => {
  it('lets a lone organization take every slot', () => {
    expect(mayStart(state(4, { a: 3 }, { a: 40 }), 'a')).toBe(true);
  });

  it('keeps the next free slot for a waiting newcomer instead of the organization above its share', () => {
    // A held all 4 slots; one of its batches ended. B waits with one lane of work.
    const now = state(4, { a: 3 }, { a: 40, b: 1 });
    expect(mayStart(now, 'a')).toBe(false);
    expect(mayStart(now, 'b')).toBe(true);
  });

  it('gives an organization above its guarantee the slots the others cannot use', () => {
    // B's one lane runs; A may fill the rest.
    expect(mayStart(state(4, { a: 2, b: 1 }, { a: 40, b: 1 }), 'a')).toBe(true);
    // B could use two lanes and runs one: A stays at its guarantee of two.
    expect(mayStart(state(4, { a: 2, b: 1 }, { a: 40, b: 2 }), 'a')).toBe(false);
  });

  it('lets an organization below its guarantee start even when others wait', () => {
    expect(mayStart(state(6, { a: 4 }, { a: 40, b: 9, c: 9 }), 'b')).toBe(true);
    expect(mayStart(state(6, { a: 4, b: 1 }, { a: 40, b: 9, c: 9 }), 'a')).toBe(false);
  });

  it('counts the candidate as waiting even when the view does not list it yet', () => {
    expect(mayStart(state(2, { a: 1 }, { a: 5 }), 'b')).toBe(true);
    expect(mayStart(state(2, {}, {}), 'b')).toBe(true);
    expect(mayStart(state(4, { b: 2 }, { a: 5 }), 'b')).toBe(false);
  });

  it('with more organizations than slots, runs at most one batch each', () => {
    const crowded = state(2, { a: 1 }, { a: 3, b: 3, c: 3 });
    expect(mayStart(crowded, 'a')).toBe(false);
    expect(mayStart(crowded, 'b')).toBe(true);
  });
});
