/** Work in slices lets the event loop run between them, and returns what the work returns. */
import { describe, expect, it } from 'vitest';
import { compactPad, compactPadSteps } from '../domain/compact-pad.ts';
import { normalizePad } from '../domain/scratchpad.ts';
import { runInSlices } from './slices.ts';

describe('runInSlices', () => {
  it('lets queued callbacks run while a pad is compacted, and returns the same compaction', async () => {
    const pad = normalizePad({
      goals: Array.from({ length: 3000 }, (_, i) => ({ text: `goal ${i}` })),
      open_items: Array.from({ length: 3000 }, (_, i) => ({ text: `open item ${i}` })),
    });
    let turns = 0;
    let done = false;
    const count = () => {
      if (!done) {
        turns++;
        setImmediate(count);
      }
    };
    setImmediate(count);
    // A slice of 0 ms yields after every step: the callbacks run between steps, on any machine.
    const compaction = await runInSlices(compactPadSteps(pad, 1, 4000), 0);
    done = true;
    expect(turns).toBeGreaterThan(10);
    expect(compaction).toEqual(compactPad(pad, 1, 4000));
  });
});
