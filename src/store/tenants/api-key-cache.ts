/**
 * A short-lived memory of which key hashes authenticate, so the key lookup is not a database
 * round trip on every request (it was one of about five statements a seed-loop request costs).
 *
 * Bound on revocation: a key revoked through this process (revokeApiKey) is forgotten at once;
 * one revoked by another process (`opspad keys revoke`, another API) is refused within the
 * cache's TTL, OPSPAD_API_KEY_CACHE_TTL — the same bound an open event stream already has
 * (OPSPAD_STREAM_KEY_CHECK). Only successful lookups are kept: an unknown key is looked up every
 * time, so a key created elsewhere works at once, and a flood of wrong keys cannot fill the
 * cache (the sign-in failure limiter bounds those). Size is capped; the oldest entry goes first.
 */
import type { Principal } from './organization-repo.ts';

interface Entry {
  principal: Principal;
  expiresAt: number;
}

export const API_KEY_CACHE_MAX_ENTRIES = 10_000;

const entries = new Map<string, Entry>();

/** The principal cached for `keyHash`, if it was looked up less than its TTL ago. */
export function cachedPrincipal(keyHash: string, now = Date.now()): Principal | undefined {
  const entry = entries.get(keyHash);
  if (!entry) {
    return undefined;
  }
  if (entry.expiresAt <= now) {
    entries.delete(keyHash);
    return undefined;
  }
  return entry.principal;
}

export function rememberPrincipal(keyHash: string, principal: Principal, ttlMs: number, now = Date.now()): void {
  if (ttlMs <= 0) {
    return;
  }
  entries.delete(keyHash); // re-inserted last: Map order is insertion order, oldest first
  entries.set(keyHash, { principal, expiresAt: now + ttlMs });
  if (entries.size > API_KEY_CACHE_MAX_ENTRIES) {
    const oldest = entries.keys().next().value;
    if (oldest !== undefined) {
      entries.delete(oldest);
    }
  }
}

/** Forgets a revoked key at once (its id; the cache is keyed by hash). */
export function forgetApiKey(keyId: string): void {
  for (const [hash, entry] of entries) {
    if (entry.principal.keyId === keyId) {
      entries.delete(hash);
    }
  }
}
