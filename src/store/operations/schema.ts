/**
 * Operations, their items, the failures retention kept and the audit trail (src/store/schema.ts).
 *
 * assistant_operation keeps the reference design's columns, types and indexes exactly. Items do
 * not live in its state_json: they have their own rows in assistant_operation_item, so recording
 * a batch touches O(batch) rows whatever the operation's size.
 */
import { sql } from 'drizzle-orm';
import {
  bigserial,
  check,
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
import { ITEM_STATUS, OPERATION_STATUS, type OperationStatus } from '../../domain/operation.ts';
import { ITEM_LEASABLE } from '../../domain/operation-lifecycle.ts';
import { sqlList, sqlLiteral } from '../db/sql-literal.ts';
import { belongsToConversation, conversationColumns, organization } from '../tenants/schema.ts';
import { FINISHED_STATUSES_SQL, OPEN_STATUSES_SQL } from './status-sql.ts';

// Statuses come from the domain's lists (domain/operation.ts), spelled as the SQL drizzle-kit
// has always generated, so the constraints and the code cannot disagree.
const ACTIVE = sql.raw(`status = ${sqlLiteral('active' satisfies OperationStatus)}`);
const FINISHED = `status IN (${FINISHED_STATUSES_SQL})`;

export const assistantOperation = pgTable(
  'assistant_operation',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    ...conversationColumns(),
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
    index('idx_assistant_operation_org_active').on(t.organizationId, t.status).where(ACTIVE),
    // "One active operation per conversation" is a database fact, not only an application rule.
    uniqueIndex('uq_assistant_operation_one_active').on(t.conversationId, t.organizationId).where(ACTIVE),
    // An organization's open operations, counted up to its quota (operation-quota.ts): the count
    // reads at most that many entries of this index, whatever the organization has finished.
    index('idx_assistant_operation_org_open')
      .on(t.organizationId)
      .where(sql.raw(`status IN (${OPEN_STATUSES_SQL})`)),
    check('ck_assistant_operation_status', sql.raw(`status IN (${sqlList(OPERATION_STATUS)})`)),
    // Retention (src/store/retention/retention-sql.ts): finished operations whose item rows, or whose batch
    // events, are still there, by finish time. Each holds only the operations retention has yet
    // to visit, so finding the next ones costs O(found), however many operations are kept.
    index('idx_assistant_operation_items_unpruned')
      .on(t.updatedAt)
      .where(sql.raw(`${FINISHED} AND NOT (state_json ? 'items_pruned_at')`)),
    index('idx_assistant_operation_events_unpruned')
      .on(t.updatedAt)
      .where(sql.raw(`${FINISHED} AND NOT (state_json ? 'events_pruned_at')`)),
  ],
);

/**
 * No foreign key to assistant_operation on purpose: Postgres checks a foreign key row by row, and
 * that check made bulk inserts of items several times slower. Rows are only ever inserted with
 * the id of the operation created in the same transaction, and the cascade on delete is a
 * statement-level trigger (opspad_delete_operation_items, operations/sql/).
 */
export const assistantOperationItem = pgTable(
  'assistant_operation_item',
  {
    operationId: uuid('operation_id').notNull(),
    /** Position in the operation's item list, from 0: the cursor and batches follow it. */
    ordinal: integer('ordinal').notNull(),
    /** COLLATE "C": ids are only ever compared for equality, so bytewise is exact and cheapest. */
    itemId: varchar('item_id', { length: 512 }).notNull(),
    status: varchar('status', { length: 16 }).notNull().default(ITEM_LEASABLE),
    /** Leases of this item that have ended (recorded, released or expired): a live lease is not counted yet. */
    attempts: integer('attempts').notNull().default(0),
    reason: text('reason'),
    result: jsonb('result'),
    updatedAt: timestamp('updated_at', { withTimezone: true }),
  },
  (t) => [
    primaryKey({ columns: [t.operationId, t.ordinal], name: 'pk_assistant_operation_item' }),
    // `update` names items by id; the index also makes ids unique within an operation.
    uniqueIndex('uq_assistant_operation_item_id').on(t.operationId, t.itemId),
    // A lease lives only in assistant_operation_lease: a leased item stays 'pending' (its status
    // reads 'leased' where it is shown) and its row is written once per lease cycle, when it is
    // recorded. No index names status, not even in a
    // predicate: then that write is a HOT update (no new index entries, the dead version pruned
    // in the page without vacuum), for which the table's fillfactor (45) keeps room in each page.
    // The failure page of `get` and `retry_failed` read only failed rows; only a failure sets
    // reason, so this index leaves the other changes HOT.
    index('idx_assistant_operation_item_failure').on(t.operationId, t.ordinal).where(sql`reason IS NOT NULL`),
    check('ck_assistant_operation_item_status', sql.raw(`status IN (${sqlList(ITEM_STATUS)})`)),
  ],
);

/**
 * The failures retention keeps of a finished operation (the first OPSPAD_RETENTION_FAILURES, by
 * item order), moved out of assistant_operation_item when its rows are pruned: left there, a few
 * kept rows spread over the operation's ordinals would hold every page of its range of the item
 * indexes, and those pages could not be freed for other operations. Reads merge the item
 * table's failed rows and these in one ordinal order (src/store/operations/failure-sql.ts).
 */
export const assistantOperationKeptFailure = pgTable(
  'assistant_operation_kept_failure',
  {
    operationId: uuid('operation_id')
      .notNull()
      .references(() => assistantOperation.id, { onDelete: 'cascade' }),
    ordinal: integer('ordinal').notNull(),
    /** COLLATE "C", as the item table's. */
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
 * An operator's action on every operation a filter matched (pause, resume, cancel,
 * retry_failed): who asked, the filter as given, and its progress. The operations it acts on are
 * fixed when it is created (operator_bulk_action_target), so one created while it runs is not
 * caught by it.
 */
export const operatorBulkAction = pgTable(
  'operator_bulk_action',
  {
    id: uuid('id').primaryKey(),
    action: varchar('action', { length: 16 }).notNull(),
    filter: jsonb('filter').notNull(),
    actor: text('actor').notNull(),
    /** `running` until every target is applied or skipped, then `done`. */
    status: varchar('status', { length: 16 }).notNull().default('running'),
    matched: integer('matched').notNull(),
    applied: integer('applied').notNull().default(0),
    skipped: integer('skipped').notNull().default(0),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
    finishedAt: timestamp('finished_at', { withTimezone: true }),
  },
  (t) => [index('idx_operator_bulk_action_created').on(t.createdAt)],
);

/** The operations a bulk action acts on, fixed at its creation, each with its outcome. */
export const operatorBulkActionTarget = pgTable(
  'operator_bulk_action_target',
  {
    bulkActionId: uuid('bulk_action_id')
      .notNull()
      .references(() => operatorBulkAction.id, { onDelete: 'cascade' }),
    operationId: uuid('operation_id').notNull(),
    organizationId: uuid('organization_id').notNull(),
    /** `pending`, `applied`, or `skipped` (the operation had moved on, or is gone). */
    state: varchar('state', { length: 16 }).notNull().default('pending'),
    detail: text('detail'),
  },
  (t) => [primaryKey({ columns: [t.bulkActionId, t.operationId], name: 'pk_operator_bulk_action_target' })],
);
