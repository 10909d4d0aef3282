import { describe, expect, it } from 'vitest';
import { ItemIdsScanner } from './item-ids-scanner.ts';

/** Feeds `pieces` to a scanner; what it read, as JSON.parse would have it. */
function scan(pieces: readonly string[]) {
  const scanner = new ItemIdsScanner();
  const ids: unknown[] = [];
  for (const piece of pieces) {
    scanner.write(piece);
    ids.push(...scanner.takeIds());
  }
  scanner.end();
  ids.push(...scanner.takeIds());
  return {
    error: scanner.error,
    ids,
    fields: scanner.fields.map(({ key, raw }) => [key, JSON.parse(raw)]),
    idsPosition: scanner.idsPosition,
    repeatedIds: scanner.repeatedIds,
  };
}

/** Every way of cutting `text` in two, and one character at a time. */
function cuts(text: string): string[][] {
  const ways: string[][] = [[text], [...text]];
  for (let i = 1; i < text.length; i++) {
    ways.push([text.slice(0, i), text.slice(i)]);
  }
  return ways;
}

const BODY = {
  action: 'create',
  operation_type: 'send \\"sms\\"',
  total_items: 6,
  item_ids: ['a', 'b\\"c', 'é😀\n\t', '\u0000x', 12.5e1, { nested: ['[', '{', { deep: [1, null, true] }] }, ''],
  query_params: { filter: { 'a"b': [1, -2.5e-3, false, null, 'x}]'] } },
  notes: ' ',
};

describe('ItemIdsScanner', () => {
  it('reads item_ids element by element and the other fields raw, however the body is cut', () => {
    const text = JSON.stringify(BODY, null, 1);
    const { item_ids: expectedIds, ...rest } = BODY;
    for (const pieces of cuts(text)) {
      const result = scan(pieces);
      expect(result.error).toBeNull();
      expect(result.ids).toEqual(expectedIds);
      expect(result.fields).toEqual(Object.entries(rest));
      expect(result.idsPosition).toBe(3);
    }
  });

  it('finds the end of the body in every piece, with whitespace anywhere between tokens', () => {
    const text = ' {\n "item_ids" :\t[ "x" , "y" ] , "total_items" : 2 ,"n":-0 }\r\n';
    for (const pieces of cuts(text)) {
      const result = scan(pieces);
      expect(result.error).toBeNull();
      expect(result.ids).toEqual(['x', 'y']);
      expect(result.fields).toEqual([
        ['total_items', 2],
        ['n', -0],
      ]);
      expect(result.idsPosition).toBe(0);
    }
  });

  it('says when the JSON is broken, wherever it breaks', () => {
    for (const text of [
      '{"item_ids":["a",]}',
      '{"item_ids":["a" "b"]}',
      '{"item_ids":["a\u0001"]}',
      '{"item_ids":["\\x"]}',
      '{"item_ids":["a"]',
      '{"item_ids":["a"],}',
      '{"a":}',
      '{"a" 1}',
      '{a:1}',
      '{"item_ids":[]} x',
      '{"item_ids":["a',
    ]) {
      for (const pieces of cuts(text)) {
        expect(scan(pieces).error, `${JSON.stringify(pieces)}`).not.toBeNull();
      }
    }
  });

  it('marks a second item_ids, and leaves a body whose top level is not an object alone', () => {
    expect(scan(['{"item_ids":["a"],"item_ids":["b"]}'])).toMatchObject({ repeatedIds: true, ids: ['a'] });
    expect(scan(['["item_ids"]'])).toMatchObject({ error: null, ids: [], idsPosition: -1 });
    expect(scan(['{"item_ids":null}'])).toMatchObject({ ids: [], fields: [['item_ids', null]], idsPosition: -1 });
  });
});
