/** The built-in reorganizer: deterministic, dedupes, drops what lost its source, fits the budget. */
import { describe, expect, it } from 'vitest';
import { compactPad, compactPadSteps, STEP_ENTRIES } from './compact-pad.ts';
import { recitePad } from './recitation.ts';
import { citationIssues, normalizePad } from './scratchpad.ts';

describe('compactPad', () => {
  it('merges duplicates and near duplicates, keeping the newest wording', () => {
    const pad = normalizePad({
      refs: [{ id: 'crm:1', kind: 'tool_call' }],
      facts: [
        { text: '30 contacts are tagged Lead', source_ref: 'crm:1' },
        { text: '30 contacts are tagged Lead.', source_ref: 'crm:1' },
        { text: 'Thirty contacts carry the Lead tag', source_ref: 'crm:1' },
        { text: '30 contacts are tagged  lead', source_ref: 'crm:1' },
      ],
      open_items: [{ text: 'send the SMS' }, { text: 'Send the SMS!' }],
    });
    const { pad: compacted, dropped } = compactPad(pad, 1, 4000);
    expect(compacted.facts.map((f) => f.text)).toEqual([
      'Thirty contacts carry the Lead tag',
      '30 contacts are tagged  lead',
    ]);
    expect(compacted.open_items.map((i) => i.text)).toEqual(['Send the SMS!']);
    expect(dropped).toContain('3 duplicate entries merged');
  });

  it('drops entries whose ref is gone and refs that nothing cites, keeping user:initial', () => {
    const pad = {
      ...normalizePad(
        {
          refs: [
            { id: 'a', kind: 'url' },
            { id: 'unused', kind: 'url' },
          ],
        },
        'Task',
      ),
      facts: [
        { text: 'kept', source_ref: 'a' },
        { text: 'orphan', source_ref: 'gone' },
      ],
    };
    const { pad: compacted } = compactPad(pad, 1, 4000);
    expect(compacted.facts.map((f) => f.text)).toEqual(['kept']);
    expect(compacted.refs.map((r) => r.id)).toEqual(['user:initial', 'a']);
    expect(citationIssues(compacted)).toEqual([]);
  });

  it('keeps the pad small enough to recite in full, dropping the oldest entries', () => {
    const pad = normalizePad(
      {
        facts: Array.from({ length: 5000 }, (_, i) => ({
          text: `distinct fact number ${i} with words ${i * 7}`,
          source_ref: 'user:initial',
        })),
      },
      'Big',
    );
    const { pad: compacted } = compactPad(pad, 1, 4000);
    const recited = recitePad(compacted, 2, 4000);
    expect(recited.shown.facts).toBe(compacted.facts.length);
    expect(compacted.facts.length).toBeGreaterThan(10);
    expect(compacted.facts.at(-1)?.text).toBe('distinct fact number 4999 with words 34993');
  });

  it('keeps every goal and the newest open items when goals alone overflow the budget (it dropped every open item)', () => {
    const pad = normalizePad({
      goals: Array.from({ length: 2000 }, (_, i) => ({ text: `goal ${i}` })),
      open_items: Array.from({ length: 2000 }, (_, i) => ({ text: `open item ${i}` })),
    });
    const { pad: compacted, dropped } = compactPad(pad, 1, 4000);
    expect(compacted.goals).toHaveLength(2000);
    expect(compacted.open_items.length).toBeGreaterThan(20);
    expect(compacted.open_items.at(-1)?.text).toBe('open item 1999');
    const recited = recitePad(compacted, 2, 4000);
    expect(recited.shown.open_items).toBe(compacted.open_items.length);
    expect(recited.shown.goals).toBeGreaterThan(20);
    expect(recited.text).toContain(`- …and ${2000 - recited.shown.goals} more goals not shown`);
    expect(dropped).toEqual([
      `${2000 - compacted.open_items.length} oldest open items and facts dropped to fit the recitation budget`,
    ]);
  });

  it('finds near duplicates however far apart they are, within one source only', () => {
    const filler = Array.from({ length: 3000 }, (_, i) => ({ text: `unrelated note ${i}`, source_ref: 'a' }));
    const pad = normalizePad({
      refs: [
        { id: 'a', kind: 'url' },
        { id: 'b', kind: 'url' },
      ],
      facts: [
        { text: 'the Lead tag is on 30 contacts today', source_ref: 'a' },
        ...filler,
        { text: 'the Lead tag is on 30 contacts today!', source_ref: 'b' },
        { text: 'The lead tag is on 30 contacts, today', source_ref: 'a' },
      ],
    });
    const { pad: compacted, dropped } = compactPad(pad, 1, 100_000);
    const texts = compacted.facts.map((f) => f.text);
    expect(texts).not.toContain('the Lead tag is on 30 contacts today');
    expect(texts).toContain('the Lead tag is on 30 contacts today!');
    expect(texts).toContain('The lead tag is on 30 contacts, today');
    expect(dropped).toContain('1 duplicate entries merged');
  });

  it('names at most 20 dropped entries and counts the rest', () => {
    const pad = {
      ...normalizePad({ refs: [{ id: 'a', kind: 'url' }] }),
      facts: Array.from({ length: 500 }, (_, i) => ({ text: `orphan ${i}`, source_ref: 'gone' })),
    };
    const { dropped } = compactPad(pad, 1, 4000);
    expect(dropped).toHaveLength(21);
    expect(dropped.at(-1)).toBe('…and 480 more entries whose ref is gone');
  });

  it('works in steps of a bounded number of entries, with the result of a whole run', () => {
    const pad = normalizePad({
      open_items: Array.from({ length: 5000 }, (_, i) => ({ text: `open item ${i} for lead ${i % 97}` })),
    });
    const steps = compactPadSteps(pad, 1, 4000);
    let yields = 0;
    let step = steps.next();
    while (!step.done) {
      yields++;
      step = steps.next();
    }
    expect(yields).toBeGreaterThanOrEqual((2 * 5000) / STEP_ENTRIES);
    expect(step.value).toEqual(compactPad(pad, 1, 4000));
  });

  it('is deterministic', () => {
    const pad = normalizePad(
      {
        facts: [
          { text: 'x y z', source_ref: 'user:initial' },
          { text: 'x y z', source_ref: 'user:initial' },
        ],
      },
      'T',
    );
    expect(compactPad(pad, 1, 4000)).toEqual(compactPad(structuredClone(pad), 1, 4000));
  });
});
