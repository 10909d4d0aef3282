/** Sizes as stored JSON: exact up to the limit, and bounded by the limit, not by the value. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { checkJsonBytes, checkNoteBytes, jsonBytesUpTo } from './size-limits.ts';

const bytesOf = (value: unknown) => Buffer.byteLength(JSON.stringify(value), 'utf8');

describe('jsonBytesUpTo', () => {
  it('is the UTF-8 length of JSON.stringify for any JSON value under the limit', () => {
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 6 }), (value) => {
        expect(jsonBytesUpTo(value, Number.MAX_SAFE_INTEGER)).toBe(bytesOf(value));
      }),
      { numRuns: 500 },
    );
  });

  it('is above the limit exactly when the value is, whatever the limit', () => {
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 4 }), fc.nat({ max: 400 }), (value, max) => {
        expect(jsonBytesUpTo(value, max) > max).toBe(bytesOf(value) > max);
      }),
      { numRuns: 500 },
    );
  });

  it('counts escapes and multi-byte characters as stored', () => {
    const value = { 'clé "x"': ['\u0000\n', '😀', 'é'], n: -1.5e-7, ok: true, none: null };
    expect(jsonBytesUpTo(value, 10_000)).toBe(bytesOf(value));
  });

  it('stops at the limit: a value nested 100,000 levels deep or with a 50 MB string is measured only that far', () => {
    let deep: unknown = 1;
    for (let i = 0; i < 100_000; i++) {
      deep = [deep];
    }
    expect(jsonBytesUpTo(deep, 1000)).toBeGreaterThan(1000);
    expect(jsonBytesUpTo({ big: 'x'.repeat(50_000_000) }, 16_384)).toBeGreaterThan(16_384);
  });
});

describe('size errors', () => {
  it('name the field, the limit and its variable', () => {
    expect(() =>
      checkJsonBytes('queryParamsBytes', 'query_params', { a: 'x'.repeat(100) }, 50, 'Keep it small.'),
    ).toThrow(
      'Invalid input: query_params: is more than 50 bytes as stored JSON; the limit is 50 bytes (OPSPAD_MAX_QUERY_PARAMS_BYTES). Keep it small.',
    );
    expect(() => checkNoteBytes('notes', 'ééé', 5)).toThrow(
      /notes: is 6 bytes; the limit is 5 bytes \(OPSPAD_MAX_NOTE_BYTES\)/,
    );
    expect(() => checkNoteBytes('notes', 'éé', 4)).not.toThrow();
  });
});
