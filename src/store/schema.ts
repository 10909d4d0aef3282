/**
 * The Postgres schema, as drizzle tables, one file per concern: tenants and conversations
 * (schema-tenants.ts), operations and their items (schema-operations.ts), scratchpads
 * (schema-scratchpads.ts), and retention's own bookkeeping here. `npm run db:generate` turns
 * changes in any of them into a new migration under drizzle/; migrations are append-only once
 * committed.
 */
import { bigint, pgTable, timestamp, varchar } from 'drizzle-orm/pg-core';

export * from './schema-operations.ts';
export * from './schema-scratchpads.ts';
export * from './schema-tenants.ts';

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
