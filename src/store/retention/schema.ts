/** Retention's own bookkeeping (src/store/schema.ts gathers every folder's tables for drizzle-kit). */
import { bigint, pgTable, timestamp, varchar } from 'drizzle-orm/pg-core';

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
