/**
 * Recitation of the structured pad: budget, summaries by count, whole lines, stability, and each
 * ref named once (facts grouped under it; an operation the fragment lists written as its alias).
 */
import { describe, expect, it } from 'vitest';
import { recitePad, renderRecitation } from './recitation.ts';
import { normalizePad, type Pad } from './scratchpad.ts';

const OP = '3f2a1b4c-5d6e-4f70-8a9b-0c1d2e3f4a5b';

function padWith(facts: number, openItems: number): Pad {
  return normalizePad(
    {
      refs: [
        { id: 'crm:1', kind: 'tool_call', label: 'contacts search' },
        { id: `operation:${OP}`, kind: 'operation', label: 'send_sms' },
      ],
      facts: Array.from({ length: facts }, (_, i) => ({
        text: `fact ${i} about the contacts`,
        source_ref: i % 4 === 3 ? `operation:${OP}` : 'crm:1',
      })),
      open_items: Array.from({ length: openItems }, (_, i) => ({ text: `open item ${i}` })),
    },
    'Follow up with every Lead',
  );
}

const count = (text: string, part: string) => text.split(part).length - 1;

describe('recitePad', () => {
  it('recites a small pad whole, each ref named once at the head of its facts', () => {
    const recited = recitePad(padWith(8, 1), 7, 4000);
    expect(recited.text.split('\n')).toEqual([
      `Scratchpad v7 (in ref ids, u1 = ${OP}):`,
      'Goals:',
      '- Follow up with every Lead [user:initial]',
      'Open items:',
      '- open item 0',
      'Facts from crm:1 (tool_call: contacts search):',
      '- fact 0 about the contacts',
      '- fact 1 about the contacts',
      '- fact 2 about the contacts',
      '- fact 4 about the contacts',
      '- fact 5 about the contacts',
      '- fact 6 about the contacts',
      'Facts from operation:u1 (operation: send_sms):',
      '- fact 3 about the contacts',
      '- fact 7 about the contacts',
    ]);
    expect(recited.shown).toEqual({ goals: 1, open_items: 1, facts: 8, refs: 3 });
    expect(recited.chars).toBe(recited.text.length);
  });

  it('writes the UUID of an item ref once, as u1, and names a ref cited by one fact inline', () => {
    const pad = normalizePad({
      refs: [
        { id: `item:${OP}:c1`, kind: 'item' },
        { id: `item:${OP}:c2`, kind: 'item' },
      ],
      facts: [
        { text: 'c1 has no phone number', source_ref: `item:${OP}:c1` },
        { text: 'c2 has no phone number', source_ref: `item:${OP}:c2` },
      ],
    });
    expect(recitePad(pad, 1, 4000).text).toBe(
      [
        `Scratchpad v1 (in ref ids, u1 = ${OP}):`,
        'Facts:',
        '- c1 has no phone number [item:u1:c1]',
        '- c2 has no phone number [item:u1:c2]',
      ].join('\n'),
    );
    const { selection } = recitePad(pad, 1, 4000);
    expect(renderRecitation(selection, new Map([[OP, '#1']]))).toContain('- c2 has no phone number [item:#1:c2]');
  });

  it('writes an operation the fragment lists under its alias, and says what the alias means', () => {
    const { selection } = recitePad(padWith(8, 0), 2, 4000);
    const text = renderRecitation(selection, new Map([[OP, '#1']]));
    expect(text.split('\n')[0]).toBe('Scratchpad v2 (in ref ids, #n = the id of operation #n):');
    expect(text).toContain('Facts from #1:\n- fact 3 about the contacts\n- fact 7 about the contacts');
    expect(text).not.toContain(OP);
  });

  it.each([1000, 2500, 4000, 10_000])('stays within a budget of %i characters with 10,000 facts', (budget) => {
    const recited = recitePad(padWith(10_000, 3000), 1, budget);
    expect(recited.text.length).toBeLessThanOrEqual(budget);
    expect(recited.shown.facts).toBeGreaterThan(0);
    expect(recited.text).toContain(`Facts:\n- …${10_000 - recited.shown.facts} older facts not shown`);
    expect(recited.text).toContain(`- …${3000 - recited.shown.open_items} older open items not shown`);
    // The newest entries are the ones kept, every line is whole, and each ref is named once.
    expect(recited.text).toContain('- fact 9999 about the contacts');
    expect(count(recited.text, 'crm:1')).toBe(1);
    expect(count(recited.text, OP)).toBe(1);
    for (const line of recited.text.split('\n')) {
      expect(
        /^(Scratchpad v1 \(in ref ids, u1 = [0-9a-f-]{36}\):|Goals:|Open items:|Facts( from .+)?:|- .+)$/.test(line),
        line,
      ).toBe(true);
    }
  });

  it('leaves out the oldest open items and facts when asked to trim, counting them', () => {
    const { selection } = recitePad(padWith(10, 4), 1, 4000);
    const text = renderRecitation(selection, new Map(), { open_items: 3, facts: 6 });
    expect(text).toContain('Open items:\n- …3 older open items not shown\n- open item 3');
    expect(text).toContain('Facts:\n- …6 older facts not shown');
    expect(text).not.toContain('- fact 5 about');
    expect(text).toContain('- fact 9 about');
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
