import { describe, expect, it } from 'vitest';
import { completedWhole } from './record-batch.ts';

describe('completedWhole', () => {
  const leased = ['a', 'b', 'c'];

  it('is true when every leased item completed, in any order', () => {
    expect(completedWhole({ completed: ['c', 'a', 'b'], failed: [] }, leased)).toBe(true);
  });

  it('is false for a failure, a missing item, a repeat or an id outside the batch', () => {
    expect(completedWhole({ completed: ['a', 'b'], failed: [{ id: 'c', reason: 'no' }] }, leased)).toBe(false);
    expect(completedWhole({ completed: ['a', 'b'], failed: [] }, leased)).toBe(false);
    expect(completedWhole({ completed: ['a', 'b', 'b'], failed: [] }, leased)).toBe(false);
    expect(completedWhole({ completed: ['a', 'b', 'z'], failed: [] }, leased)).toBe(false);
    expect(completedWhole({ completed: [], failed: [] }, [])).toBe(false);
  });
});
