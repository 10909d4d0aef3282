/**
 * The queue schema of a prefix: readable, a valid identifier, and distinct for distinct prefixes.
 */
import { describe, expect, it } from 'vitest';
import { queueSchemaFor, quoteSchema } from './queue-schema.ts';

describe('queueSchemaFor', () => {
  it('prefixes a plain lower-case prefix, and hashes any other', () => {
    expect(queueSchemaFor('opspad')).toBe('bullmq_opspad');
    expect(queueSchemaFor('team_2')).toBe('bullmq_team_2');
    expect(queueSchemaFor('opspad-test')).toMatch(/^bullmq_opspad_test_[0-9a-f]{8}$/);
  });

  it('keeps prefixes apart that differ only in characters an identifier cannot hold, or in case', () => {
    const names = ['a.b', 'a-b', 'a_b', 'A_b', 'a_B'].map(queueSchemaFor);
    expect(new Set(names).size).toBe(5);
  });

  it('always gives a name Postgres and BullMQ accept (at most 63 bytes)', () => {
    for (const prefix of ['x'.repeat(64), '-'.repeat(64), '9lives', 'Z.Z', 'opspad-test-0a1b2c3d-4e5f6a7b']) {
      const schema = queueSchemaFor(prefix);
      expect(schema.length).toBeLessThanOrEqual(63);
      expect(schema).toMatch(/^[A-Za-z_][A-Za-z0-9_]*$/);
      expect(quoteSchema(schema)).toBe(`"${schema}"`);
    }
  });

  it('refuses to quote anything else', () => {
    expect(() => quoteSchema('a"; DROP TABLE job; --')).toThrow(/not a schema name/);
  });
});
