/**
 * Organizations and their API keys. A key is shown once, when created; only its SHA-256 is
 * stored, and requests are matched by hash, so the database never holds a usable key and the
 * lookup leaks nothing about how close a wrong key came.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { Queryable } from '../db/db.ts';
import { cachedPrincipal, forgetApiKey, rememberPrincipal } from './api-key-cache.ts';
import { newWebhookSecret } from './webhook-secret-repo.ts';

const KEY_PREFIX = 'opk_';

export function hashApiKey(apiKey: string): string {
  return createHash('sha256').update(apiKey, 'utf8').digest('hex');
}

export interface CreatedApiKey {
  organization_id: string;
  api_key: string;
  key_id: string;
}

/**
 * Creates an API key for the organization named `organizationName`, creating it when new, with
 * its webhook signing secret (kept when it has one).
 */
export async function createApiKey(db: Queryable, organizationName: string): Promise<CreatedApiKey> {
  const apiKey = `${KEY_PREFIX}${randomBytes(32).toString('base64url')}`;
  const rows = await db.query<{ organization_id: string; key_id: string }>(
    `WITH org AS (
       INSERT INTO organization (name) VALUES ($1)
       ON CONFLICT (name) DO UPDATE SET name = excluded.name
       RETURNING id),
     webhook_secret AS (
       INSERT INTO organization_webhook_secret (organization_id, secret)
       SELECT id, $4 FROM org
       ON CONFLICT (organization_id) WHERE expires_at IS NULL DO NOTHING)
     INSERT INTO api_key (organization_id, key_hash, key_prefix)
     SELECT id, $2, $3 FROM org
     RETURNING organization_id, id AS key_id`,
    [organizationName, hashApiKey(apiKey), apiKey.slice(0, KEY_PREFIX.length + 6), newWebhookSecret()],
  );
  const row = rows[0];
  if (!row) {
    throw new Error('creating the API key returned no row');
  }
  return { organization_id: row.organization_id, api_key: apiKey, key_id: row.key_id };
}

export interface Principal {
  organizationId: string;
  /** The API key's id; for an OAuth access token, its grant's id (what rate limits count by). */
  keyId: string;
  /** Set when the credential is an OAuth access token of `/mcp`: the grant it belongs to. */
  grantId?: string;
}

/**
 * The organization a (not revoked) key belongs to, or null. With `cacheTtlMs`, a key found is
 * remembered that long (api-key-cache.ts: what that means for revocation).
 */
export async function authenticateApiKey(
  db: Queryable,
  apiKey: string,
  options: { cacheTtlMs?: number } = {},
): Promise<Principal | null> {
  if (!apiKey.startsWith(KEY_PREFIX)) {
    return null;
  }
  const keyHash = hashApiKey(apiKey);
  const ttlMs = options.cacheTtlMs ?? 0;
  const cached = ttlMs > 0 ? cachedPrincipal(keyHash) : undefined;
  if (cached) {
    return cached;
  }
  const rows = await db.query<{ organization_id: string; id: string }>(
    'SELECT organization_id, id FROM api_key WHERE key_hash = $1 AND revoked_at IS NULL',
    [keyHash],
  );
  const row = rows[0];
  if (!row) {
    return null;
  }
  const principal = { organizationId: row.organization_id, keyId: row.id };
  rememberPrincipal(keyHash, principal, ttlMs);
  return principal;
}

/**
 * Whether the principal's key is still valid (not revoked, organization not deleted): what a
 * long-lived request such as an event stream checks now and then. By primary key: one index probe.
 */
export async function isApiKeyActive(db: Queryable, principal: Principal): Promise<boolean> {
  const rows = await db.query('SELECT 1 FROM api_key WHERE id = $1 AND organization_id = $2 AND revoked_at IS NULL', [
    principal.keyId,
    principal.organizationId,
  ]);
  return rows.length > 0;
}

export interface ApiKeySummary {
  key_id: string;
  organization_id: string;
  organization: string;
  key_prefix: string;
  created_at: Date;
  revoked_at: Date | null;
}

/** The keys of an organization (never the keys themselves: only their first characters). */
export async function listApiKeys(db: Queryable, organizationName: string): Promise<ApiKeySummary[]> {
  return db.query<ApiKeySummary>(
    `SELECT k.id AS key_id, k.organization_id, o.name AS organization, k.key_prefix, k.created_at, k.revoked_at
     FROM api_key k JOIN organization o ON o.id = k.organization_id
     WHERE o.name = $1 ORDER BY k.created_at`,
    [organizationName],
  );
}

/**
 * Revokes a key, named by its id or by the key itself; returns it, or null when no key matches.
 * This process refuses it from the next request on; other API processes within their key
 * cache's TTL (api-key-cache.ts).
 */
export async function revokeApiKey(db: Queryable, keyIdOrKey: string): Promise<ApiKeySummary | null> {
  const byKey = keyIdOrKey.startsWith(KEY_PREFIX);
  const rows = await db.query<ApiKeySummary>(
    `UPDATE api_key k SET revoked_at = coalesce(k.revoked_at, now())
     FROM organization o
     WHERE o.id = k.organization_id AND ${byKey ? 'k.key_hash = $1' : 'k.id::text = $1'}
     RETURNING k.id AS key_id, k.organization_id, o.name AS organization, k.key_prefix, k.created_at, k.revoked_at`,
    [byKey ? hashApiKey(keyIdOrKey) : keyIdOrKey.toLowerCase()],
  );
  const revoked = rows[0] ?? null;
  if (revoked) {
    forgetApiKey(revoked.key_id);
  }
  return revoked;
}

/** The first `limit` organizations by name (what an operator chooses from, e.g. granting an OAuth client). */
export async function organizationsByName(db: Queryable, limit: number): Promise<{ id: string; name: string }[]> {
  return db.query('SELECT id, name FROM organization ORDER BY name LIMIT $1', [limit]);
}

/** An organization by its name, or null. */
export async function organizationByName(db: Queryable, name: string): Promise<{ id: string; name: string } | null> {
  const rows = await db.query<{ id: string; name: string }>('SELECT id, name FROM organization WHERE name = $1', [
    name,
  ]);
  return rows[0] ?? null;
}
