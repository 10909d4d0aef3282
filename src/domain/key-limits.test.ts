import { describe, expect, it } from 'vitest';
import { grantItems, limitKeyOf, ownKeyOf, throttleWords, withOverride } from './key-limits.ts';

const source = { organizationId: 'org-1', operationType: 'send_sms', queryParams: { account: 'acct-7' } };

describe('limitKeyOf', () => {
  it("keeps every key inside its organization, and falls back to the organization's own", () => {
    expect(limitKeyOf(source, undefined)).toBe('org-1');
    expect(limitKeyOf(source, (s) => String(s.queryParams.account))).toBe('org-1:acct-7');
    expect(limitKeyOf({ ...source, organizationId: 'org-2' }, (s) => String(s.queryParams.account))).toBe(
      'org-2:acct-7',
    );
    expect(limitKeyOf(source, () => '')).toBe('org-1');
    expect(limitKeyOf(source, () => 42)).toBe('org-1');
    expect(
      limitKeyOf(source, () => {
        throw new Error('no account');
      }),
    ).toBe('org-1');
  });

  it('hashes a key a tenant made too long or unprintable', () => {
    const long = limitKeyOf(source, () => 'x'.repeat(10_000));
    expect(long).toMatch(/^org-1:sha256:[0-9a-f]{64}$/);
    expect(limitKeyOf(source, () => 'a\nb')).toMatch(/^org-1:sha256:/);
    expect(ownKeyOf(long)).toMatch(/^sha256:/);
    expect(ownKeyOf('org-1')).toBe('');
  });
});

describe('grantItems', () => {
  const rate = { max: 20, intervalMs: 1000 };

  it('waits for a whole batch of tokens, capped at the bucket', () => {
    const empty = grantItems({ rate }, { bucket: { tokens: 0, atMs: 0 }, held: 0 }, 5, 0);
    expect(empty).toMatchObject({ items: 0, limitedBy: 'rate', waitMs: 250 });
    expect(grantItems({ rate }, { bucket: { tokens: 0, atMs: 0 }, held: 0 }, 5, 250).items).toBe(5);
    // A batch bigger than the bucket gets the bucket.
    expect(grantItems({ rate }, { held: 0 }, 100, 0).items).toBe(20);
  });

  it('gives what the concurrency leaves free, down to one item', () => {
    expect(grantItems({ concurrency: 3 }, { held: 2 }, 10, 0).items).toBe(1);
    expect(grantItems({ concurrency: 3 }, { held: 3 }, 10, 0)).toMatchObject({ items: 0, limitedBy: 'concurrency' });
  });

  it("lets an organization's override replace the handler's figures one by one", () => {
    expect(withOverride({ rate, concurrency: 3 }, { concurrency: 9 })).toEqual({ rate, concurrency: 9 });
    expect(throttleWords({ rate: { max: 20, interval_ms: 1000 }, concurrency: 3 })).toBe(
      '20 items per second, 3 items in flight',
    );
  });
});
