/**
 * The scratchpads of a conversation: executions and their notes and traces, the reorganized pad
 * with its versions and events, and what each turn was told (src/store/schema.ts).
 */
import { sql } from 'drizzle-orm';
import {
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
  uuid,
  varchar,
} from 'drizzle-orm/pg-core';
import { belongsToConversation, conversationColumns } from '../tenants/schema.ts';

/**
 * An execution scopes notes (the notes scratchpad): notes written in it are cleared when it
 * ends; persistent notes belong to the conversation and survive.
 */
export const assistantExecution = pgTable(
  'assistant_execution',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    ...conversationColumns(),
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
    ...conversationColumns(),
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
    ...conversationColumns(),
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
    ...conversationColumns(),
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
    ...conversationColumns(),
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
    ...conversationColumns(),
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
