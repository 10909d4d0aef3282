import { describe, expect, it } from 'vitest';
import { API_KEY_CACHE_MAX_ENTRIES, cachedPrincipal, forgetApiKey, rememberPrincipal } from './api-key-cache.ts';

const principal = (keyId: string) => ({ organizationId: `org-${keyId}`, keyId });

describe('API key cache', () => {
  it('answers a key found within its TTL, and not after', () => {
    rememberPrincipal('hash-ttl', principal('ttl'), 5_000, 1_000);
    expect(cachedPrincipal('hash-ttl', 5_999)).toEqual(principal('ttl'));
    expect(cachedPrincipal('hash-ttl', 6_000)).toBeUndefined();
    // Gone for good: an expired entry is dropped, not revived.
    expect(cachedPrincipal('hash-ttl', 1_000)).toBeUndefined();
  });

  it('keeps nothing with a TTL of 0', () => {
    rememberPrincipal('hash-zero', principal('zero'), 0, 1_000);
    expect(cachedPrincipal('hash-zero', 1_000)).toBeUndefined();
  });

  it('forgets a revoked key at once, by its id', () => {
    rememberPrincipal('hash-revoked', principal('revoked'), 60_000, 1_000);
    rememberPrincipal('hash-kept', principal('kept'), 60_000, 1_000);
    forgetApiKey('revoked');
    expect(cachedPrincipal('hash-revoked', 1_001)).toBeUndefined();
    expect(cachedPrincipal('hash-kept', 1_001)).toEqual(principal('kept'));
  });

  it('holds at most its cap, dropping the oldest first', () => {
    const now = 1_000;
    for (let i = 0; i <= API_KEY_CACHE_MAX_ENTRIES; i++) {
      rememberPrincipal(`hash-cap-${i}`, principal(`cap-${i}`), 60_000, now);
    }
    expect(cachedPrincipal('hash-cap-0', now)).toBeUndefined();
    expect(cachedPrincipal(`hash-cap-${API_KEY_CACHE_MAX_ENTRIES}`, now)).toEqual(
      principal(`cap-${API_KEY_CACHE_MAX_ENTRIES}`),
    );
  });
});
