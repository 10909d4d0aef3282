/** What a bulk action skips up front, and the filter's rules. */
import { describe, expect, it } from 'vitest';
import { BulkFilter, skipBeforeApplying } from './bulk-action.ts';

describe('skipBeforeApplying', () => {
  it('names the skip when the action asks for what is already so, or cannot happen now', () => {
    expect(skipBeforeApplying('pause', 'active')).toBeNull();
    expect(skipBeforeApplying('pause', 'paused')).toBe('it is already paused');
    expect(skipBeforeApplying('pause', 'completed')).toBe('it is completed: it cannot be paused');
    expect(skipBeforeApplying('resume', 'awaiting_approval')).toBe(
      'it is awaiting_approval: it cannot be resumed until a person approves it',
    );
    expect(skipBeforeApplying('cancel', 'awaiting_approval')).toBeNull();
    expect(skipBeforeApplying('cancel', 'cancelled')).toBe('it is already cancelled');
    // Whether there are failures to retry is the tool's to say.
    expect(skipBeforeApplying('retry_failed', 'completed')).toBeNull();
  });
});

describe('BulkFilter', () => {
  it('needs at least one field, and a window that can match something', () => {
    expect(BulkFilter.safeParse({}).success).toBe(false);
    expect(BulkFilter.safeParse({ org: 'acme', surprise: 1 }).success).toBe(false);
    const reversed = BulkFilter.safeParse({
      created_after: '2026-02-01T00:00:00Z',
      created_before: '2026-01-01T00:00:00+01:00',
    });
    expect(reversed.error?.issues[0]?.path).toEqual(['created_after']);
    expect(
      BulkFilter.parse({
        org: ' acme ',
        created_after: '2026-01-01T00:00:00+01:00',
        created_before: '2026-01-01T00:00:00Z',
      }),
    ).toEqual({ org: 'acme', created_after: '2026-01-01T00:00:00+01:00', created_before: '2026-01-01T00:00:00Z' });
  });

  it('refuses the ISO times that Postgres cannot read, naming the field, and takes the edges it can', () => {
    const refused = (created_before: string) =>
      BulkFilter.safeParse({ created_before }).error?.issues.map((i) => [i.path.join('.'), i.message]);
    expect(refused('0000-01-01T00:00:00Z')).toEqual([
      ['created_before', 'has year 0000, which does not exist: give a year from 0001 to 9999'],
    ]);
    expect(refused('2026-01-01T00:00:00+16:00')).toEqual([
      ['created_before', 'has an offset of 16 hours or more: give an offset from -15:59 to +15:59 (e.g. Z or +01:00)'],
    ]);
    for (const edge of ['0001-01-01T00:00:00+01:00', '9999-12-31T23:59:59-15:59', '2026-01-01T00:00:00+15:59']) {
      expect(refused(edge), edge).toBeUndefined();
    }
  });
});
