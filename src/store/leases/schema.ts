/**
 * The leases in force (src/store/schema.ts gathers every folder's tables for drizzle-kit).
 */
import { integer, pgTable, primaryKey, text, timestamp, uuid } from 'drizzle-orm/pg-core';
import { assistantOperation } from '../operations/schema.ts';

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
