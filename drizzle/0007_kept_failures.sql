-- Kept failures out of the item table.
--
-- Retention keeps a finished operation's first failures (OPSPAD_RETENTION_FAILURES). Left in
-- assistant_operation_item, a few rows spread over the operation's ordinals kept every page of
-- its key range in the primary key and the (operation, item) index: those pages were never
-- freed, and the indexes grew with the operations pruned while the heap stayed flat. Retention
-- now moves the kept failures into assistant_operation_kept_failure in the statement that deletes
-- their range, so a pruned operation leaves no entry in the item table's indexes.
--
-- Reads merge the item table's failed rows and the kept ones in one ordinal order
-- (src/store/failure-sql.ts). Kept failures of operations pruned before this migration move too.
CREATE TABLE "assistant_operation_kept_failure" (
	"operation_id" uuid NOT NULL,
	"ordinal" integer NOT NULL,
	"item_id" varchar(512) NOT NULL,
	"attempts" integer NOT NULL,
	"reason" text NOT NULL,
	"updated_at" timestamp with time zone,
	CONSTRAINT "pk_assistant_operation_kept_failure" PRIMARY KEY("operation_id","ordinal")
);
--> statement-breakpoint
CREATE INDEX "idx_assistant_operation_kept_failure_item" ON "assistant_operation_kept_failure" USING btree ("operation_id","item_id");--> statement-breakpoint
WITH "moved" AS (
  DELETE FROM "assistant_operation_item" i USING "assistant_operation" o
  WHERE o."id" = i."operation_id" AND i."status" = 'failed' AND i."reason" IS NOT NULL
    AND (o."state_json" ? 'items_pruned_at' OR i."ordinal" < (o."state_json"->>'items_pruned_through')::float8)
  RETURNING i."operation_id", i."ordinal", i."item_id", i."attempts", i."reason", i."updated_at")
INSERT INTO "assistant_operation_kept_failure" ("operation_id", "ordinal", "item_id", "attempts", "reason", "updated_at")
SELECT "operation_id", "ordinal", "item_id", "attempts", "reason", "updated_at" FROM "moved";--> statement-breakpoint
-- The foreign key last: adding it locks assistant_operation against writes until the migration
-- commits, so it is not held while the failures above are moved.
ALTER TABLE "assistant_operation_kept_failure" ADD CONSTRAINT "assistant_operation_kept_failure_operation_id_assistant_operation_id_fk" FOREIGN KEY ("operation_id") REFERENCES "public"."assistant_operation"("id") ON DELETE cascade ON UPDATE no action;
