/** The built-in reorganizer: deterministic, dedupes, drops what lost its source, fits the budget. */
import { describe, expect, it } from 'vitest';
import { compactPad } from './compact-pad.ts';
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
