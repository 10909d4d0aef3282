/**
 * Validation errors a model can act on: findDuplicates names repeated ids once each, in order;
 * validationError names each bad field by its path (e.g. `item_ids[3]`, `failed[0].reason`) and
 * lists at most 20 issues, however many there are; findNulCharacter names the field holding a
 * NUL character (which Postgres cannot store) and nothing else.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { AppError } from './errors.ts';
import { OperationToolInput } from './operation-input.ts';
import { findDuplicates, findNulCharacter, parseOrThrow, validationError } from './validation.ts';

describe('findDuplicates', () => {
  it('returns nothing when every value is unique', () => {
    expect(findDuplicates(['a', 'b', 'c'])).toEqual([]);
    expect(findDuplicates([])).toEqual([]);
  });

  it('returns each repeated value once, in order of first repeat', () => {
    expect(findDuplicates(['a', 'b', 'c', 'b', 'a', 'b', 'a', 'd'])).toEqual(['b', 'a']);
  });

  it('is exact: no trimming or case folding', () => {
    expect(findDuplicates(['A', 'a', ' a', 'a '])).toEqual([]);
  });

  it('stops after `limit` repeated values', () => {
    const values = ['x', 'y', 'z', 'x', 'y', 'z'];
    expect(findDuplicates(values, 2)).toEqual(['x', 'y']);
    expect(findDuplicates(values, 10)).toEqual(['x', 'y', 'z']);
  });
});

function errorOf(schema: z.ZodType, value: unknown): AppError {
  const parsed = schema.safeParse(value);
  if (parsed.success) {
    throw new Error('expected the value to be invalid');
  }
  return validationError(parsed.error, 'test input');
}

describe('validationError', () => {
  it('names array elements by index, e.g. item_ids[3]', () => {
    const error = errorOf(OperationToolInput, {
      action: 'create',
      operation_type: 'send_sms',
      total_items: 4,
      item_ids: ['a', 'b', 'c', ''],
    });
    expect(error).toBeInstanceOf(AppError);
    expect(error.code).toBe('validation_failed');
    expect(error.message).toBe('Invalid test input: item_ids[3]: must not be empty');
    expect(error.details).toEqual({
      issues: [{ field: 'item_ids[3]', message: 'must not be empty' }],
      total_issues: 1,
    });
  });

  it('names nested fields with dots and indexes, e.g. failed[1].reason', () => {
    const error = errorOf(OperationToolInput, {
      action: 'update',
      operation_id: '00000000-0000-4000-8000-000000000000',
      failed: [
        { id: 'a', reason: 'bounced' },
        { id: 'b', reason: '' },
      ],
    });
    expect(error.message).toContain('failed[1].reason: must say why the item failed');
  });

  it('names unknown fields and says to remove them', () => {
    const error = errorOf(OperationToolInput, { action: 'progress', foo: 1, bar: 2 });
    expect(error.message).toContain('unknown fields "foo", "bar": remove them');
  });

  it('calls a problem with the whole value "(body)"', () => {
    const error = errorOf(z.object({ a: z.string() }), 'not an object');
    expect(error.details).toMatchObject({ issues: [{ field: '(body)' }] });
  });

  it('lists at most 20 issues and says how many more there are', () => {
    const error = errorOf(
      z.array(z.string()),
      Array.from({ length: 35 }, (_, i) => i),
    );
    const issues = (error.details as { issues: { field: string }[] }).issues;
    expect(issues).toHaveLength(20);
    expect(issues[0]?.field).toBe('[0]');
    expect(issues[19]?.field).toBe('[19]');
    expect(error.details.total_issues).toBe(35);
    expect(error.message).toMatch(/\(and 15 more\)$/);
    expect(error.message).not.toContain('[20]');
  });

  it('does not mention "more" when every issue is listed', () => {
    const error = errorOf(z.array(z.string()), [1, 2]);
    expect(error.message).toBe(
      'Invalid test input: [0]: Invalid input: expected string, received number; [1]: Invalid input: expected string, received number',
    );
  });
});

describe('parseOrThrow', () => {
  it('returns the parsed value', () => {
    expect(parseOrThrow(OperationToolInput, { action: 'pause' })).toEqual({ action: 'pause' });
  });

  it('throws a validation_failed AppError naming the field', () => {
    expect(() => parseOrThrow(OperationToolInput, { action: 'cancel', operation_id: 'nope' }, 'input')).toThrowError(
      /^Invalid input: operation_id: must be an operation id/,
    );
  });
});

describe('findNulCharacter', () => {
  const message = 'must not contain the NUL character (\\u0000)';

  it('finds nothing in values without NUL, including a backslash followed by "u0000"', () => {
    expect(findNulCharacter({ action: 'create', item_ids: ['a', 'C:\\u0000'], n: 1, ok: true, x: null })).toBeNull();
    expect(findNulCharacter(undefined)).toBeNull();
    expect(findNulCharacter([])).toBeNull();
  });

  it('names an array element, e.g. item_ids[2]', () => {
    expect(findNulCharacter({ action: 'create', item_ids: ['a', 'b', 'c\u0000'] })).toEqual({
      field: 'item_ids[2]',
      message,
    });
  });

  it('names a nested value and a nested key', () => {
    expect(
      findNulCharacter({
        failed: [
          { id: 'a', reason: 'x' },
          { id: 'b', reason: '\u0000' },
        ],
      }),
    ).toEqual({
      field: 'failed[1].reason',
      message,
    });
    expect(findNulCharacter({ query_params: { filter: { 'ta\u0000g': 'Lead' } } })).toEqual({
      field: 'query_params.filter',
      message: `field names ${message}`,
    });
  });

  it('reports the first NUL in document order', () => {
    expect(findNulCharacter({ a: ['ok', { b: '\u0000' }], c: '\u0000' })?.field).toBe('a[1].b');
  });

  it('handles a whole-body string and any nesting depth without recursion', () => {
    expect(findNulCharacter('\u0000')).toEqual({ field: '(body)', message });
    let deep: unknown = ['\u0000'];
    for (let i = 0; i < 50_000; i++) {
      deep = [deep];
    }
    expect(findNulCharacter(deep)?.field).toBe('[0]'.repeat(50_001));
  });
});
