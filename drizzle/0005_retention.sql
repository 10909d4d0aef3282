-- Retention (src/store/retention-sql.ts): what finds, in O(found), the rows that are due.
-- - Two partial indexes over finished operations whose item rows, or batch events, retention has
--   not deleted yet, by finish time (updated_at); an operation leaves each once it is pruned.
-- - Ended executions whose traces are not deleted yet, by end time.
-- - Per pad, how many versions are not pruned yet (version - versions_pruned_through).
-- - retention_watermark: where the age-based scans of append-only tables (context renders,
--   reorganization events, conversation-scope traces) stopped, so no run walks the index
--   entries of rows an earlier run deleted.
-- The indexes are built in the migrator's transaction; assistant_operation has one row per
-- operation (items live in their own table), so the build is short.
CREATE TABLE "retention_watermark" (
	"table_name" varchar(64) PRIMARY KEY NOT NULL,
	"last_id" bigint NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "assistant_execution" ADD COLUMN "traces_pruned_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "scratchpad" ADD COLUMN "versions_pruned_through" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
CREATE INDEX "idx_assistant_execution_traces_unpruned" ON "assistant_execution" USING btree ("ended_at") WHERE status = 'ended' AND traces_pruned_at IS NULL;--> statement-breakpoint
CREATE INDEX "idx_assistant_operation_items_unpruned" ON "assistant_operation" USING btree ("updated_at") WHERE status IN ('completed', 'cancelled') AND NOT (state_json ? 'items_pruned_at');--> statement-breakpoint
CREATE INDEX "idx_assistant_operation_events_unpruned" ON "assistant_operation" USING btree ("updated_at") WHERE status IN ('completed', 'cancelled') AND NOT (state_json ? 'events_pruned_at');--> statement-breakpoint
CREATE INDEX "idx_scratchpad_unpruned_versions" ON "scratchpad" USING btree ((version - versions_pruned_through));