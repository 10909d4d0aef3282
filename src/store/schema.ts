/**
 * The Postgres schema, as drizzle tables. `npm run db:generate` turns changes here into a new
 * migration under drizzle/; migrations are append-only once committed.
 *
 * assistant_operation keeps the reference design's columns, types and indexes exactly. Items do
 * not live in its state_json: they have their own rows in assistant_operation_item, so recording
 * a batch touches O(batch) rows whatever the operation's size.
 */
import { sql } from 'drizzle-orm';
import type { AnyPgColumn } from 'drizzle-orm/pg-core';
import {
  bigint,
  bigserial,
  boolean,
  check,
  foreignKey,
  index,
  integer,
  jsonb,
  pgTable,
  primaryKey,
  text,
  timestamp,
  uniqueIndex,
  uuid,
  varchar,
} from 'drizzle-orm/pg-core';

export const organization = pgTable('organization', {
  id: uuid('id').primaryKey().defaultRandom(),
  name: text('name').notNull().unique(),
  createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
});

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

/** The composite foreign key of a row that belongs to a conversation (deleted with it). */
function belongsToConversation(table: string, t: { organizationId: AnyPgColumn; conversationId: AnyPgColumn }) {
  return foreignKey({
    name: `fk_${table}_conversation`,
    columns: [t.organizationId, t.conversationId],
    foreignColumns: [assistantConversation.organizationId, assistantConversation.id],
  }).onDelete('cascade');
}

export const OPERATION_STATUSES = ['active', 'paused', 'completed', 'cancelled'] as const;

export const assistantOperation = pgTable(
  'assistant_operation',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    conversationId: uuid('conversation_id').notNull(),
    organizationId: uuid('organization_id')
      .notNull()
      .references(() => organization.id, { onDelete: 'cascade' }),
    operationType: varchar('operation_type', { length: 64 }).notNull(),
    status: varchar('status', { length: 32 }).notNull(),
    totalItems: integer('total_items').notNull(),
    completedCount: integer('completed_count').notNull().default(0),
    failedCount: integer('failed_count').notNull().default(0),
    stateJson: jsonb('state_json').notNull().default({}),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
    updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    belongsToConversation('assistant_operation', t),
    index('idx_assistant_operation_conversation').on(t.conversationId),
    index('idx_assistant_operation_org_active').on(t.organizationId, t.status).where(sql`status = 'active'`),
    // "One active operation per conversation" is a database fact, not only an application rule.
    uniqueIndex('uq_assistant_operation_one_active')
      .on(t.conversationId, t.organizationId)
      .where(sql`status = 'active'`),
    check('ck_assistant_operation_status', sql`status IN ('active', 'paused', 'completed', 'cancelled')`),
    // Retention (src/store/retention-sql.ts): finished operations whose item rows, or whose batch
    // events, are still there, by finish time. Each holds only the operations retention has yet
    // to visit, so finding the next ones costs O(found), however many operations are kept.
    index('idx_assistant_operation_items_unpruned')
      .on(t.updatedAt)
      .where(sql`status IN ('completed', 'cancelled') AND NOT (state_json ? 'items_pruned_at')`),
    index('idx_assistant_operation_events_unpruned')
      .on(t.updatedAt)
      .where(sql`status IN ('completed', 'cancelled') AND NOT (state_json ? 'events_pruned_at')`),
  ],
);

export const ITEM_STATUSES = ['pending', 'leased', 'completed', 'failed', 'abandoned'] as const;

/**
 * No foreign key to assistant_operation on purpose: Postgres checks a foreign key row by row, and
 * that check tripled the cost of inserting a million items (8 s instead of 2.3 s). Rows are only
 * ever inserted with the id of the operation created in the same transaction, and the cascade on
 * delete is a statement-level trigger (drizzle/0001_item_cascade.sql).
 */
export const assistantOperationItem = pgTable(
  'assistant_operation_item',
  {
    operationId: uuid('operation_id').notNull(),
    /** Position in the operation's item list, from 0: the cursor and batches follow it. */
    ordinal: integer('ordinal').notNull(),
    itemId: varchar('item_id', { length: 512 }).notNull(),
    status: varchar('status', { length: 16 }).notNull().default('pending'),
    attempts: integer('attempts').notNull().default(0),
    leaseOwner: text('lease_owner'),
    leaseExpiresAt: timestamp('lease_expires_at', { withTimezone: true }),
    reason: text('reason'),
    result: jsonb('result'),
    updatedAt: timestamp('updated_at', { withTimezone: true }),
  },
  (t) => [
    primaryKey({ columns: [t.operationId, t.ordinal], name: 'pk_assistant_operation_item' }),
    // `update` names items by id; the index also makes ids unique within an operation.
    uniqueIndex('uq_assistant_operation_item_id').on(t.operationId, t.itemId),
    // No index names status, lease_owner or lease_expires_at, not even in a predicate: then a
    // row's pending → leased → completed changes are HOT updates (no new index entries, dead
    // versions pruned in the page without vacuum), helped by the table's fillfactor
    // (25: drizzle/0006_ledger_leases.sql, 0009_item_fillfactor.sql). Leases are found through
    // assistant_operation_lease.
    // The failure page of `get` and `retry_failed` read only failed rows; only a failure sets
    // reason, so this index leaves the other changes HOT.
    index('idx_assistant_operation_item_failure').on(t.operationId, t.ordinal).where(sql`reason IS NOT NULL`),
    check(
      'ck_assistant_operation_item_status',
      sql`status IN ('pending', 'leased', 'completed', 'failed', 'abandoned')`,
    ),
  ],
);

/**
 * The failures retention keeps of a finished operation (the first OPSPAD_RETENTION_FAILURES, by
 * item order), moved out of assistant_operation_item when its rows are pruned: left there, a few
 * kept rows spread over the operation's ordinals would hold every page of its range of the item
 * indexes, and those pages could not be freed for other operations. Reads merge the item
 * table's failed rows and these in one ordinal order (src/store/failure-sql.ts).
 */
export const assistantOperationKeptFailure = pgTable(
  'assistant_operation_kept_failure',
  {
    operationId: uuid('operation_id')
      .notNull()
      .references(() => assistantOperation.id, { onDelete: 'cascade' }),
    ordinal: integer('ordinal').notNull(),
    itemId: varchar('item_id', { length: 512 }).notNull(),
    attempts: integer('attempts').notNull(),
    reason: text('reason').notNull(),
    updatedAt: timestamp('updated_at', { withTimezone: true }),
  },
  (t) => [
    primaryKey({ columns: [t.operationId, t.ordinal], name: 'pk_assistant_operation_kept_failure' }),
    // The operator view finds an item by its id.
    index('idx_assistant_operation_kept_failure_item').on(t.operationId, t.itemId),
  ],
);

/**
 * The leases in force, one row per batch: what the owner holds (`ordinals`), how many of them it
 * still holds (`remaining`: the operation's in-flight count is the sum), and until when. A
 * handful of rows per operation whatever its size, so renewing a batch, counting what is in
 * flight and finding expired leases never read item rows other than the batch's own.
 */
export const assistantOperationLease = pgTable(
  'assistant_operation_lease',
  {
    operationId: uuid('operation_id')
      .notNull()
      .references(() => assistantOperation.id, { onDelete: 'cascade' }),
    owner: text('owner').notNull(),
    ordinals: integer('ordinals').array().notNull(),
    remaining: integer('remaining').notNull(),
    expiresAt: timestamp('expires_at', { withTimezone: true }).notNull(),
  },
  (t) => [primaryKey({ columns: [t.operationId, t.owner], name: 'pk_assistant_operation_lease' })],
);

/** Append-only audit trail of what happened to each operation, and who did it. */
export const operationEvent = pgTable(
  'operation_event',
  {
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    operationId: uuid('operation_id')
      .notNull()
      .references(() => assistantOperation.id, { onDelete: 'cascade' }),
    organizationId: uuid('organization_id')
      .notNull()
      .references(() => organization.id, { onDelete: 'cascade' }),
    kind: varchar('kind', { length: 32 }).notNull(),
    actor: text('actor').notNull(),
    data: jsonb('data').notNull().default({}),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [index('idx_operation_event_operation').on(t.operationId, t.id)],
);

// ─── Scratchpads ─────────────────────────────────────────────────────────────────────────────

/**
 * An execution scopes notes (the notes scratchpad): notes written in it are cleared when it
 * ends; persistent notes belong to the conversation and survive.
 */
export const assistantExecution = pgTable(
  'assistant_execution',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    conversationId: uuid('conversation_id').notNull(),
    organizationId: uuid('organization_id')
      .notNull()
      .references(() => organization.id, { onDelete: 'cascade' }),
    status: varchar('status', { length: 16 }).notNull().default('running'),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
    endedAt: timestamp('ended_at', { withTimezone: true }),
    /** Retention deleted this ended execution's traces (OPSPAD_RETENTION_TRACES after its end). */
    tracesPrunedAt: timestamp('traces_pruned_at', { withTimezone: true }),
  },
  (t) => [
    belongsToConversation('assistant_execution', t),
    index('idx_assistant_execution_conversation').on(t.conversationId),
    // Ended executions whose traces retention has yet to delete, by end time.
    index('idx_assistant_execution_traces_unpruned')
      .on(t.endedAt)
      .where(sql`status = 'ended' AND traces_pruned_at IS NULL`),
    check('ck_assistant_execution_status', sql`status IN ('running', 'ended')`),
  ],
);

/**
 * Notes of the notes scratchpad. `execution_id` null: the conversation's own scope. Persistent
 * notes belong to the conversation (execution_id null) and are shown in every execution.
 */
export const scratchpadNote = pgTable(
  'scratchpad_note',
  {
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    conversationId: uuid('conversation_id').notNull(),
    organizationId: uuid('organization_id')
      .notNull()
      .references(() => organization.id, { onDelete: 'cascade' }),
    executionId: uuid('execution_id').references(() => assistantExecution.id, { onDelete: 'cascade' }),
    persistent: boolean('persistent').notNull().default(false),
    text: text('text').notNull(),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    belongsToConversation('scratchpad_note', t),
    index('idx_scratchpad_note_scope').on(t.conversationId, t.executionId, t.id),
  ],
);

/** Every read and write of the notes scratchpad, in order, for operators. */
export const scratchpadTrace = pgTable(
  'scratchpad_trace',
  {
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    conversationId: uuid('conversation_id').notNull(),
    organizationId: uuid('organization_id')
      .notNull()
      .references(() => organization.id, { onDelete: 'cascade' }),
    executionId: uuid('execution_id').references(() => assistantExecution.id, { onDelete: 'cascade' }),
    kind: varchar('kind', { length: 8 }).notNull(),
    notes: text('notes'),
    at: timestamp('at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    belongsToConversation('scratchpad_trace', t),
    index('idx_scratchpad_trace_execution').on(t.executionId, t.id),
    check('ck_scratchpad_trace_kind', sql`kind IN ('read', 'write')`),
  ],
);

/**
 * The structured scratchpad of a conversation (goals, open items, facts, refs): the current
 * version here, every version in scratchpad_version. `version` is the optimistic-concurrency
 * token every write compares.
 */
export const scratchpad = pgTable(
  'scratchpad',
  {
    conversationId: uuid('conversation_id').notNull(),
    organizationId: uuid('organization_id')
      .notNull()
      .references(() => organization.id, { onDelete: 'cascade' }),
    version: integer('version').notNull(),
    pad: jsonb('pad').notNull(),
    /** Per-pad options (reorganize_every, schema_retries, max_recent_messages). */
    settings: jsonb('settings').notNull().default({}),
    /** Writes since the last reorganization: the cadence counter. */
    writesSinceReorganize: integer('writes_since_reorganize').notNull().default(0),
    /** The version the last reorganization produced or examined; the sweep skips unchanged pads. */
    reorganizedVersion: integer('reorganized_version').notNull().default(0),
    /**
     * The recitation selected when the version was written ({budget, text, format, selection}):
     * the context fragment renders this short selection instead of parsing a pad of thousands
     * of facts on every turn.
     */
    recitation: jsonb('recitation'),
    updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
    /** Retention deleted the versions up to this one (keeping the newest OPSPAD_RETENTION_PAD_VERSIONS). */
    versionsPrunedThrough: integer('versions_pruned_through').notNull().default(0),
  },
  (t) => [
    primaryKey({ columns: [t.organizationId, t.conversationId], name: 'pk_scratchpad' }),
    belongsToConversation('scratchpad', t),
    // Versions not yet pruned, per pad: retention reads only the pads with more than it keeps.
    index('idx_scratchpad_unpruned_versions').on(sql`(version - versions_pruned_through)`),
    // The sweep's query: only pads changed since their last reorganization are in this index.
    index('idx_scratchpad_needs_reorganization').on(t.updatedAt).where(sql`version > reorganized_version`),
  ],
);

export const scratchpadVersion = pgTable(
  'scratchpad_version',
  {
    conversationId: uuid('conversation_id').notNull(),
    organizationId: uuid('organization_id').notNull(),
    version: integer('version').notNull(),
    pad: jsonb('pad').notNull(),
    source: varchar('source', { length: 32 }).notNull(),
    reason: text('reason').notNull(),
    metadata: jsonb('metadata').notNull().default({}),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    primaryKey({ columns: [t.organizationId, t.conversationId, t.version], name: 'pk_scratchpad_version' }),
    foreignKey({
      name: 'fk_scratchpad_version_scratchpad',
      columns: [t.organizationId, t.conversationId],
      foreignColumns: [scratchpad.organizationId, scratchpad.conversationId],
    }).onDelete('cascade'),
  ],
);

/** Reorganization outcomes (reorganized, invalid_sources, llm_error, store_error, superseded). */
export const scratchpadEvent = pgTable(
  'scratchpad_event',
  {
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    conversationId: uuid('conversation_id').notNull(),
    organizationId: uuid('organization_id')
      .notNull()
      .references(() => organization.id, { onDelete: 'cascade' }),
    kind: varchar('kind', { length: 32 }).notNull(),
    status: varchar('status', { length: 32 }).notNull(),
    data: jsonb('data').notNull().default({}),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    belongsToConversation('scratchpad_event', t),
    index('idx_scratchpad_event_conversation').on(t.conversationId, t.id),
  ],
);

/** What the assistant was told on each turn: the pad version and a hash of the fragment. */
export const contextRender = pgTable(
  'context_render',
  {
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    conversationId: uuid('conversation_id').notNull(),
    organizationId: uuid('organization_id')
      .notNull()
      .references(() => organization.id, { onDelete: 'cascade' }),
    padVersion: integer('pad_version').notNull(),
    chars: integer('chars').notNull(),
    sha256: text('sha256').notNull(),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    belongsToConversation('context_render', t),
    index('idx_context_render_conversation').on(t.conversationId, t.id),
  ],
);

/**
 * Where retention's scan of an append-only table stopped (the last id it passed): each run
 * starts there, so it never walks the index entries of rows already deleted (they stay until
 * vacuum). One row per table pruned by age.
 */
export const retentionWatermark = pgTable('retention_watermark', {
  tableName: varchar('table_name', { length: 64 }).primaryKey(),
  lastId: bigint('last_id', { mode: 'number' }).notNull(),
  updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
});
