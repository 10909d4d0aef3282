/** Recitation of the structured pad: budget, summaries by count, whole lines, stability. */
import { describe, expect, it } from 'vitest';
import { recitePad } from './recitation.ts';
import { normalizePad, type Pad } from './scratchpad.ts';

function padWith(facts: number, openItems: number): Pad {
  return normalizePad(
    {
      refs: [{ id: 'crm:1', kind: 'tool_call', label: 'contacts search' }],
      facts: Array.from({ length: facts }, (_, i) => ({ text: `fact ${i} about the contacts`, source_ref: 'crm:1' })),
      open_items: Array.from({ length: openItems }, (_, i) => ({ text: `open item ${i}` })),
    },
    'Follow up with every Lead',
  );
}

describe('recitePad', () => {
  it('recites a small pad whole, with its size against the budget', () => {
    const recited = recitePad(padWith(2, 1), 7, 4000);
    expect(recited.text).toMatch(/^## Scratchpad \(version 7, (\d+)\/4,000 chars\)\n/);
    const printed = Number(/version 7, (\d+)\//.exec(recited.text)?.[1]);
    expect(printed).toBe(recited.text.length);
    expect(recited.text).toContain('- Follow up with every Lead [source_ref: user:initial]');
    expect(recited.text).toContain('- fact 1 about the contacts [source_ref: crm:1]');
    expect(recited.text).toContain('- crm:1 (tool_call): contacts search');
    expect(recited.shown).toEqual({ goals: 1, open_items: 1, facts: 2, refs: 2 });
  });

  it.each([1000, 2500, 4000, 10_000])('stays within a budget of %i characters with 10,000 facts', (budget) => {
    const recited = recitePad(padWith(10_000, 3000), 1, budget);
    expect(recited.text.length).toBeLessThanOrEqual(budget);
    expect(recited.shown.facts).toBeGreaterThan(0);
    expect(recited.text).toContain(`- …${10_000 - recited.shown.facts} older facts not shown`);
    expect(recited.text).toContain(`- …${3000 - recited.shown.open_items} older open items not shown`);
    // The newest entries are the ones kept, and every line is whole.
    expect(recited.text).toContain('- fact 9999 about the contacts [source_ref: crm:1]');
    for (const line of recited.text.split('\n')) {
      expect(line === '' || /^(## |### |- |Working memory)/.test(line)).toBe(true);
    }
  });

  it('is the same text for the same pad and version: nothing changes between turns', () => {
    const pad = padWith(500, 50);
    expect(recitePad(pad, 3, 4000).text).toBe(recitePad(structuredClone(pad), 3, 4000).text);
  });

  it('gives goals at most half the room when there are open items or facts, the whole room otherwise', () => {
    const goals = Array.from({ length: 1000 }, (_, i) => ({ text: `goal ${i}` }));
    const mixed = recitePad(normalizePad({ goals, open_items: [{ text: 'the one open item' }] }), 1, 4000);
    expect(mixed.shown.open_items).toBe(1);
    expect(mixed.text).toContain('- the one open item');
    const alone = recitePad(normalizePad({ goals }), 1, 4000);
    expect(alone.shown.goals).toBeGreaterThan(mixed.shown.goals * 1.5);
    expect(alone.text.length).toBeLessThanOrEqual(4000);
  });

  it('recites nothing for an empty pad', () => {
    expect(recitePad(normalizePad({}), 1, 4000).text).toBe('');
  });
});
