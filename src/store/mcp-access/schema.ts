/**
 * What hosted MCP clients hold (src/store/schema.ts): the sessions of `/mcp` and the OAuth
 * clients, grants, codes and tokens of the authorization flow. Tokens and codes are stored as
 * SHA-256 hashes only, like API keys: the database never holds a usable credential.
 */
import { sql } from 'drizzle-orm';
import { boolean, index, jsonb, pgTable, text, timestamp, uuid } from 'drizzle-orm/pg-core';
import { organization } from '../tenants/schema.ts';

/**
 * A Streamable HTTP session of `/mcp` (its id is the `Mcp-Session-Id`): what the stdio server keeps
 * in its process — the home conversation and the operations the session last named — kept here,
 * so any API process serves any request of any session.
 */
export const mcpSession = pgTable(
  'mcp_session',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    organizationId: uuid('organization_id')
      .notNull()
      .references(() => organization.id, { onDelete: 'cascade' }),
    /** The conversation of the scratchpads and the context, and where creates go first. */
    homeConversationId: uuid('home_conversation_id').notNull(),
    /** True when the client pinned the conversation: every call goes there. */
    pinned: boolean('pinned').notNull().default(false),
    lastOperationId: uuid('last_operation_id'),
    /** Operations this session created at home (at most a few: see src/mcp/session.ts). */
    homeOperationIds: uuid('home_operation_ids').array().notNull().default(sql`'{}'::uuid[]`),
    clientName: text('client_name'),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
    touchedAt: timestamp('touched_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [index('idx_mcp_session_organization_touched').on(t.organizationId, t.touchedAt)],
);

/** A client registered by dynamic client registration (RFC 7591): public, PKCE only, no secret. */
export const oauthClient = pgTable(
  'oauth_client',
  {
    id: text('id').primaryKey(),
    /** The registered metadata as answered to the client (redirect URIs, name, …). */
    metadata: jsonb('metadata').notNull(),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [index('idx_oauth_client_created').on(t.createdAt)],
);

/** What an operator granted one client: access to one organization, until revoked. */
export const oauthGrant = pgTable(
  'oauth_grant',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    organizationId: uuid('organization_id')
      .notNull()
      .references(() => organization.id, { onDelete: 'cascade' }),
    clientId: text('client_id')
      .notNull()
      .references(() => oauthClient.id, { onDelete: 'cascade' }),
    /** The resource (RFC 8707) the tokens are for: this server's `/mcp`. */
    resource: text('resource').notNull(),
    grantedBy: text('granted_by').notNull(),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
    revokedAt: timestamp('revoked_at', { withTimezone: true }),
  },
  (t) => [index('idx_oauth_grant_organization').on(t.organizationId), index('idx_oauth_grant_client').on(t.clientId)],
);

/** An authorization code between the operator's consent and the client's token request: used once. */
export const oauthCode = pgTable('oauth_code', {
  codeHash: text('code_hash').primaryKey(),
  grantId: uuid('grant_id')
    .notNull()
    .references(() => oauthGrant.id, { onDelete: 'cascade' }),
  codeChallenge: text('code_challenge').notNull(),
  redirectUri: text('redirect_uri').notNull(),
  expiresAt: timestamp('expires_at', { withTimezone: true }).notNull(),
});

/** An access or refresh token of a grant. */
export const oauthToken = pgTable(
  'oauth_token',
  {
    tokenHash: text('token_hash').primaryKey(),
    grantId: uuid('grant_id')
      .notNull()
      .references(() => oauthGrant.id, { onDelete: 'cascade' }),
    kind: text('kind').notNull(),
    expiresAt: timestamp('expires_at', { withTimezone: true }).notNull(),
  },
  (t) => [index('idx_oauth_token_grant').on(t.grantId)],
);
