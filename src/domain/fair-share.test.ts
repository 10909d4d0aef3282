/**
 * The fair-share rule: a lone organization uses every slot; once another waits, the slots freed
 * go to the newcomer up to its guarantee, never to the one already above its share; capacity
 * nobody else can use is not kept idle.
 */
import { describe, expect, it } from 'vitest';
import { guaranteedShare, mayStart } from './fair-share.ts';

const state = (
  slots: number,
  running: Record<string, number>,
  waiting: Record<string, number>,
  weights: Record<string, number> = {},
) => ({
  slots,
  running: new Map(Object.entries(running)),
  waiting: new Map(Object.entries(waiting)),
  weights: new Map(Object.entries(weights)),
});

describe('guaranteedShare', () => {
  it('splits the slots evenly, rounding down, and never below one', () => {
    expect(guaranteedShare(8, 1)).toBe(8);
    expect(guaranteedShare(8, 3)).toBe(2);
    expect(guaranteedShare(4, 9)).toBe(1);
    expect(guaranteedShare(4, 0)).toBe(4);
  });

  it('splits in proportion to weight, rounding down, and never below one', () => {
    expect(guaranteedShare(8, 4, 3)).toBe(6);
    expect(guaranteedShare(8, 4, 1)).toBe(2);
    expect(guaranteedShare(8, 101, 1)).toBe(1);
    expect(guaranteedShare(3, 4, 3)).toBe(2);
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

  it('guarantees a heavier organization more slots, in proportion to its weight', () => {
    // 8 slots, weights 3 and 1: A is guaranteed 6, B 2.
    const weights = { a: 3, b: 1 };
    expect(mayStart(state(8, { a: 5, b: 2 }, { a: 40, b: 40 }, weights), 'a')).toBe(true);
    expect(mayStart(state(8, { a: 6, b: 1 }, { a: 40, b: 40 }, weights), 'a')).toBe(false);
    expect(mayStart(state(8, { a: 6, b: 1 }, { a: 40, b: 40 }, weights), 'b')).toBe(true);
    expect(mayStart(state(8, { a: 5, b: 2 }, { a: 40, b: 40 }, weights), 'b')).toBe(false);
    // Unweighted, the same state splits 4 and 4.
    expect(mayStart(state(8, { a: 5, b: 2 }, { a: 40, b: 40 }), 'a')).toBe(false);
  });

  it("counts the candidate's own weight when the view does not list it", () => {
    // 8 slots, A waits with weight 1, B (weight 3) is not listed: B is guaranteed 6.
    expect(mayStart(state(8, { a: 2, b: 5 }, { a: 40 }, { a: 1, b: 3 }), 'b')).toBe(true);
    expect(mayStart(state(8, { a: 2, b: 5 }, { a: 40 }, { a: 1 }), 'b')).toBe(false);
  });

  it('keeps at least one slot for every waiting organization, however light', () => {
    // 4 slots, A weighs 100 and B 1: B is still guaranteed one.
    const weights = { a: 100, b: 1 };
    expect(mayStart(state(4, { a: 3 }, { a: 40, b: 1 }, weights), 'a')).toBe(false);
    expect(mayStart(state(4, { a: 3 }, { a: 40, b: 1 }, weights), 'b')).toBe(true);
  });

  it('keeps a slot for a newcomer when the floors of one make the guarantees add up to more than the slots', () => {
    // 4 slots, weights 100, 1, 1: guarantees 3, 1 and 1 (5 > 4). A runs 2 and C 1; B runs none.
    const weights = { a: 100, b: 1, c: 1 };
    const crowded = state(4, { a: 2, c: 1 }, { a: 40, b: 1, c: 1 }, weights);
    expect(mayStart(crowded, 'a')).toBe(false);
    expect(mayStart(crowded, 'b')).toBe(true);
    // A first batch is never held back; with room for every newcomer, A grows to its guarantee.
    expect(mayStart(state(4, { c: 1 }, { a: 40, b: 1, c: 1 }, weights), 'a')).toBe(true);
    expect(mayStart(state(6, { a: 3, b: 1 }, { a: 40, b: 1, c: 1 }, weights), 'a')).toBe(true);
    expect(mayStart(state(6, { a: 4, b: 1 }, { a: 40, b: 1, c: 1 }, weights), 'a')).toBe(false);
  });
});
