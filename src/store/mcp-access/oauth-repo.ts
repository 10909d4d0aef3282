/**
 * The OAuth authorization flow of `/mcp` (src/api/mcp/oauth-provider.ts): registered clients,
 * the grants an operator makes (one client, one organization), their single-use codes and their
 * tokens. Codes and tokens are random strings shown once; only their SHA-256 is stored, so the
 * database never holds a usable credential, and a lookup leaks nothing about a near miss.
 *
 * Revoking any token of a grant revokes the grant: every token of it stops working at once (each
 * request looks its token up; nothing is cached).
 * Bounds: clients no grant was ever made for are deleted a day after they registered (at the
 * next registration); a grant keeps only its unexpired tokens (expired ones go when it is next
 * issued tokens); a refresh token is replaced at each use.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { Database, Queryable } from '../db/db.ts';
import type { Principal } from '../tenants/organization-repo.ts';

export const ACCESS_TOKEN_PREFIX = 'opa_';
const REFRESH_TOKEN_PREFIX = 'opr_';
const CODE_PREFIX = 'opc_';
/** How long a code is good for between the consent and the client's token request. */
const CODE_TTL_SECONDS = 300;
/** Clients never granted anything are deleted this long after they registered. */
const UNGRANTED_CLIENT_TTL_SECONDS = 24 * 3600;

const hash = (secret: string) => createHash('sha256').update(secret, 'utf8').digest('hex');
const secret = (prefix: string) => `${prefix}${randomBytes(32).toString('base64url')}`;

/** Stores a registered client (its metadata as answered to it); clears out stale ungranted ones. */
export async function registerOAuthClient(db: Queryable, clientId: string, metadata: object): Promise<void> {
  await db.query(
    `DELETE FROM oauth_client c WHERE c.created_at < now() - make_interval(secs => $1)
       AND NOT EXISTS (SELECT 1 FROM oauth_grant g WHERE g.client_id = c.id)`,
    [UNGRANTED_CLIENT_TTL_SECONDS],
  );
  await db.query('INSERT INTO oauth_client (id, metadata) VALUES ($1, $2)', [clientId, JSON.stringify(metadata)]);
}

export async function getOAuthClient(db: Queryable, clientId: string): Promise<Record<string, unknown> | null> {
  const rows = await db.query<{ metadata: Record<string, unknown> }>(
    'SELECT metadata FROM oauth_client WHERE id = $1',
    [clientId],
  );
  return rows[0]?.metadata ?? null;
}

/** What the operator granted: the grant, and the code the client exchanges for tokens. */
export async function grantOAuthClient(
  db: Database,
  grant: {
    clientId: string;
    organizationId: string;
    resource: string;
    grantedBy: string;
    codeChallenge: string;
    redirectUri: string;
  },
): Promise<{ grantId: string; code: string }> {
  const code = secret(CODE_PREFIX);
  const grantId = await db.transaction(async (tx) => {
    const rows = await tx.query<{ id: string }>(
      `INSERT INTO oauth_grant (organization_id, client_id, resource, granted_by)
       VALUES ($1, $2, $3, $4) RETURNING id`,
      [grant.organizationId, grant.clientId, grant.resource, grant.grantedBy],
    );
    const id = rows[0]?.id;
    if (!id) {
      throw new Error('granting the client returned no row');
    }
    await tx.query(
      `INSERT INTO oauth_code (code_hash, grant_id, code_challenge, redirect_uri, expires_at)
       VALUES ($1, $2, $3, $4, now() + make_interval(secs => $5))`,
      [hash(code), id, grant.codeChallenge, grant.redirectUri, CODE_TTL_SECONDS],
    );
    return id;
  });
  return { grantId, code };
}

/** The PKCE challenge of a live code of `clientId`, or null. Reads; the exchange spends the code. */
export async function codeChallengeOf(db: Queryable, clientId: string, code: string): Promise<string | null> {
  const rows = await db.query<{ code_challenge: string }>(
    `SELECT c.code_challenge FROM oauth_code c JOIN oauth_grant g ON g.id = c.grant_id
     WHERE c.code_hash = $1 AND g.client_id = $2 AND g.revoked_at IS NULL AND c.expires_at > now()`,
    [hash(code), clientId],
  );
  return rows[0]?.code_challenge ?? null;
}

export interface IssuedTokens {
  accessToken: string;
  refreshToken: string;
  /** Seconds the access token is valid. */
  expiresIn: number;
}

export interface TokenLifetimes {
  accessMs: number;
  refreshMs: number;
}

async function issueTokens(tx: Queryable, grantId: string, lifetimes: TokenLifetimes): Promise<IssuedTokens> {
  const accessToken = secret(ACCESS_TOKEN_PREFIX);
  const refreshToken = secret(REFRESH_TOKEN_PREFIX);
  await tx.query('DELETE FROM oauth_token WHERE grant_id = $1 AND expires_at <= now()', [grantId]);
  await tx.query(
    `INSERT INTO oauth_token (token_hash, grant_id, kind, expires_at) VALUES
       ($1, $3, 'access', now() + make_interval(secs => $4)),
       ($2, $3, 'refresh', now() + make_interval(secs => $5))`,
    [hash(accessToken), hash(refreshToken), grantId, lifetimes.accessMs / 1000, lifetimes.refreshMs / 1000],
  );
  return { accessToken, refreshToken, expiresIn: Math.floor(lifetimes.accessMs / 1000) };
}

export type CodeExchange =
  | { ok: true; tokens: IssuedTokens; resource: string }
  | { ok: false; reason: 'unknown_code' | 'redirect_uri_mismatch' | 'resource_mismatch' };

/**
 * Spends a code of `clientId` (once: a second exchange finds nothing) for a first pair of tokens.
 * The redirect URI, when the client sends it, must be the one the code was issued for, and the
 * resource, when sent, the grant's.
 */
export async function exchangeOAuthCode(
  db: Database,
  exchange: { clientId: string; code: string; redirectUri?: string; resource?: string },
  lifetimes: TokenLifetimes,
): Promise<CodeExchange> {
  return db.transaction(async (tx) => {
    const rows = await tx.query<{ grant_id: string; redirect_uri: string; resource: string }>(
      `DELETE FROM oauth_code c USING oauth_grant g
       WHERE c.code_hash = $1 AND g.id = c.grant_id AND g.client_id = $2
         AND g.revoked_at IS NULL AND c.expires_at > now()
       RETURNING c.grant_id, c.redirect_uri, g.resource`,
      [hash(exchange.code), exchange.clientId],
    );
    const row = rows[0];
    if (!row) {
      return { ok: false, reason: 'unknown_code' } as const;
    }
    if (exchange.redirectUri !== undefined && exchange.redirectUri !== row.redirect_uri) {
      return { ok: false, reason: 'redirect_uri_mismatch' } as const;
    }
    if (exchange.resource !== undefined && exchange.resource !== row.resource) {
      return { ok: false, reason: 'resource_mismatch' } as const;
    }
    return { ok: true, tokens: await issueTokens(tx, row.grant_id, lifetimes), resource: row.resource } as const;
  });
}

/** Replaces a live refresh token of `clientId` by a new pair; null when it is unknown, spent or revoked. */
export async function refreshOAuthTokens(
  db: Database,
  clientId: string,
  refreshToken: string,
  lifetimes: TokenLifetimes,
): Promise<IssuedTokens | null> {
  return db.transaction(async (tx) => {
    const rows = await tx.query<{ grant_id: string }>(
      `DELETE FROM oauth_token t USING oauth_grant g
       WHERE t.token_hash = $1 AND t.kind = 'refresh' AND g.id = t.grant_id AND g.client_id = $2
         AND g.revoked_at IS NULL AND t.expires_at > now()
       RETURNING t.grant_id`,
      [hash(refreshToken), clientId],
    );
    const grantId = rows[0]?.grant_id;
    return grantId ? issueTokens(tx, grantId, lifetimes) : null;
  });
}

/** Who a live access token speaks for (its grant's organization), or null. */
export async function authenticateOAuthToken(db: Queryable, token: string): Promise<Principal | null> {
  if (!token.startsWith(ACCESS_TOKEN_PREFIX)) {
    return null;
  }
  const rows = await db.query<{ organization_id: string; grant_id: string }>(
    `SELECT g.organization_id, g.id AS grant_id FROM oauth_token t JOIN oauth_grant g ON g.id = t.grant_id
     WHERE t.token_hash = $1 AND t.kind = 'access' AND t.expires_at > now() AND g.revoked_at IS NULL`,
    [hash(token)],
  );
  const row = rows[0];
  return row ? { organizationId: row.organization_id, keyId: row.grant_id, grantId: row.grant_id } : null;
}

/** Revokes the grant of a token (of `clientId`, when given); true when one was found. */
export async function revokeOAuthToken(db: Database, token: string, clientId?: string): Promise<boolean> {
  return db.transaction(async (tx) => {
    const rows = await tx.query<{ grant_id: string }>(
      `SELECT t.grant_id FROM oauth_token t JOIN oauth_grant g ON g.id = t.grant_id
       WHERE t.token_hash = $1 AND ($2::text IS NULL OR g.client_id = $2)`,
      [hash(token), clientId ?? null],
    );
    const grantId = rows[0]?.grant_id;
    if (!grantId) {
      return false;
    }
    await revokeGrant(tx, grantId);
    return true;
  });
}

async function revokeGrant(tx: Queryable, grantId: string): Promise<void> {
  await tx.query('UPDATE oauth_grant SET revoked_at = coalesce(revoked_at, now()) WHERE id = $1', [grantId]);
  await tx.query('DELETE FROM oauth_token WHERE grant_id = $1', [grantId]);
  await tx.query('DELETE FROM oauth_code WHERE grant_id = $1', [grantId]);
}

export interface OAuthGrantSummary {
  grant_id: string;
  organization: string;
  client_id: string;
  client_name: string | null;
  granted_by: string;
  created_at: Date;
  revoked_at: Date | null;
}

/** The grants made to clients, of one organization (by name) or all: for `opspad oauth grants`. */
export async function listOAuthGrants(db: Queryable, organizationName?: string): Promise<OAuthGrantSummary[]> {
  return db.query<OAuthGrantSummary>(
    `SELECT g.id AS grant_id, o.name AS organization, g.client_id, c.metadata->>'client_name' AS client_name,
            g.granted_by, g.created_at, g.revoked_at
     FROM oauth_grant g JOIN organization o ON o.id = g.organization_id JOIN oauth_client c ON c.id = g.client_id
     WHERE $1::text IS NULL OR o.name = $1
     ORDER BY g.created_at`,
    [organizationName ?? null],
  );
}

/** Revokes a grant by id (`opspad oauth revoke`); false when there is none. */
export async function revokeOAuthGrant(db: Database, grantId: string): Promise<boolean> {
  return db.transaction(async (tx) => {
    const rows = await tx.query('SELECT 1 FROM oauth_grant WHERE id::text = $1', [grantId.toLowerCase()]);
    if (rows.length === 0) {
      return false;
    }
    await revokeGrant(tx, grantId.toLowerCase());
    return true;
  });
}
