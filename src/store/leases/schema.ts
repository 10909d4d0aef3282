/**
 * The leases in force (src/store/schema.ts gathers every folder's tables for drizzle-kit).
 */
import { integer, pgTable, primaryKey, text, timestamp, uuid, varchar } from 'drizzle-orm/pg-core';
import { assistantOperation } from '../operations/schema.ts';

/**
 * The leases in force, one row per batch: what the owner holds (`ordinals`), how many of them it
 * still holds (`remaining`: the operation's in-flight count is the sum), and until when. A
 * handful of rows per operation whatever its size, so renewing a batch, counting what is in
 * flight and finding expired leases never read item rows other than the batch's own.
 * `max_ordinal` bounds `ordinals` from above (a release of some leaves it as it was): a lease
 * from the cursor asks whether any live lease reaches past it without reading their ordinals.
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
    maxOrdinal: integer('max_ordinal').notNull(),
  },
  (t) => [primaryKey({ columns: [t.operationId, t.owner], name: 'pk_assistant_operation_lease' })],
);

/**
 * An operation whose work waits on a provider limit (a handler's per-key rate or concurrency):
 * written by the worker that parks a batch for it, renewed while it keeps waiting, and read by
 * `get` and the context fragment so the assistant is told its operation is throttled, not
 * stalled. A row whose `until` has passed says nothing; the row goes with its operation.
 */
export const operationThrottle = pgTable('operation_throttle', {
  operationId: uuid('operation_id')
    .primaryKey()
    .references(() => assistantOperation.id, { onDelete: 'cascade' }),
  limitKey: text('limit_key').notNull(),
  /** `rate` or `concurrency`: which limit the key is at. */
  reason: varchar('reason', { length: 16 }).notNull(),
  rateMax: integer('rate_max'),
  rateIntervalMs: integer('rate_interval_ms'),
  concurrency: integer('concurrency'),
  until: timestamp('until', { withTimezone: true }).notNull(),
});
