/**
 * Tenants and their conversations: organizations, their API keys and webhook secrets, and the
 * (organization, id) conversations every other table belongs to (src/store/schema.ts).
 */
import { sql } from 'drizzle-orm';
import type { AnyPgColumn } from 'drizzle-orm/pg-core';
import {
  bigint,
  check,
  foreignKey,
  index,
  integer,
  pgTable,
  primaryKey,
  text,
  timestamp,
  uniqueIndex,
  uuid,
  varchar,
} from 'drizzle-orm/pg-core';

export const organization = pgTable(
  'organization',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    name: text('name').notNull().unique(),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
    /** Background operations of more items than this wait for a person's approval; null: none wait. */
    approveAbove: integer('approve_above'),
  },
  () => [check('ck_organization_approve_above', sql`approve_above IS NULL OR approve_above >= 0`)],
);

/** Only a SHA-256 of each key is stored; the key itself is shown once, when created. */
export const apiKey = pgTable(
  'api_key',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    organizationId: uuid('organization_id')
      .notNull()
      .references(() => organization.id, { onDelete: 'cascade' }),
    keyHash: text('key_hash').notNull().unique(),
    /** The first characters of the key, so an operator can tell keys apart. */
    keyPrefix: text('key_prefix').notNull(),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
    revokedAt: timestamp('revoked_at', { withTimezone: true }),
  },
  (t) => [index('idx_api_key_organization').on(t.organizationId)],
);

/**
 * Each organization's webhook signing secrets (Standard Webhooks `whsec_…`). The current one has
 * no expiry; after a rotation the previous one keeps signing until `expires_at`, so receivers
 * can switch without a gap. Stored as is: an HMAC key must be usable to sign.
 */
export const organizationWebhookSecret = pgTable(
  'organization_webhook_secret',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    organizationId: uuid('organization_id')
      .notNull()
      .references(() => organization.id, { onDelete: 'cascade' }),
    secret: text('secret').notNull(),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
    expiresAt: timestamp('expires_at', { withTimezone: true }),
  },
  (t) => [
    index('idx_organization_webhook_secret_organization').on(t.organizationId),
    uniqueIndex('uq_organization_webhook_secret_current').on(t.organizationId).where(sql`expires_at IS NULL`),
  ],
);

/**
 * Each organization's storage quota: the items its operations hold now (`stored_items`, kept by
 * the creates that add items and by retention that deletes them, so checking the quota reads one
 * row instead of counting items), and the limits an operator set for it (null: the deployment's
 * OPSPAD_MAX_STORED_ITEMS, OPSPAD_MAX_OPEN_OPERATIONS). A missing row is an organization with no
 * items and no overrides.
 */
export const organizationQuota = pgTable('organization_quota', {
  organizationId: uuid('organization_id')
    .primaryKey()
    .references(() => organization.id, { onDelete: 'cascade' }),
  storedItems: bigint('stored_items', { mode: 'number' }).notNull().default(0),
  maxStoredItems: bigint('max_stored_items', { mode: 'number' }),
  maxOpenOperations: integer('max_open_operations'),
  /** Its share of each handler type's fleet, relative to the others' (null: 1). */
  fairShareWeight: integer('fair_share_weight'),
  updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
});

/**
 * An organization's own provider limits for a handler type (a platform that sells tiers sets
 * them per customer), overriding the handler's declared `limits` for the organization's keys:
 * `limit_key` '' stands for every key of its operations of the type, any other value for that key
 * alone (the key the handler computes, e.g. `query_params.account`). A null column keeps the
 * handler's own figure.
 */
export const organizationKeyLimit = pgTable(
  'organization_key_limit',
  {
    organizationId: uuid('organization_id')
      .notNull()
      .references(() => organization.id, { onDelete: 'cascade' }),
    operationType: varchar('operation_type', { length: 100 }).notNull(),
    limitKey: text('limit_key').notNull().default(''),
    rateMax: integer('rate_max'),
    rateIntervalMs: integer('rate_interval_ms'),
    concurrency: integer('concurrency'),
    updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    primaryKey({ columns: [t.organizationId, t.operationType, t.limitKey], name: 'pk_organization_key_limit' }),
    check('organization_key_limit_rate_pair', sql`(${t.rateMax} IS NULL) = (${t.rateIntervalMs} IS NULL)`),
  ],
);

/**
 * A conversation is (organization, id): the id is the caller's, so two organizations that pick
 * the same id have two conversations that never meet. Every table that belongs to a conversation
 * carries both columns and a composite foreign key to this primary key; their queries already
 * filtered on both, so none needs a join or a lookup of an internal id. The key leads with
 * organization_id, which also serves the cascade from a deleted organization.
 */
export const assistantConversation = pgTable(
  'assistant_conversation',
  {
    id: uuid('id').notNull(),
    organizationId: uuid('organization_id')
      .notNull()
      .references(() => organization.id, { onDelete: 'cascade' }),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.organizationId, t.id], name: 'pk_assistant_conversation' })],
);

/**
 * The columns of a row that belongs to a conversation: the conversation's id and its
 * organization's (deleted with the organization); the key over both is
 * {@link belongsToConversation}'s.
 */
export function conversationColumns() {
  return {
    conversationId: uuid('conversation_id').notNull(),
    organizationId: uuid('organization_id')
      .notNull()
      .references(() => organization.id, { onDelete: 'cascade' }),
  };
}

/** The composite foreign key of a row that belongs to a conversation (deleted with it). */
export function belongsToConversation(table: string, t: { organizationId: AnyPgColumn; conversationId: AnyPgColumn }) {
  return foreignKey({
    name: `fk_${table}_conversation`,
    columns: [t.organizationId, t.conversationId],
    foreignColumns: [assistantConversation.organizationId, assistantConversation.id],
  }).onDelete('cascade');
}
