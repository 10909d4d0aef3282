-- The ledger at the limit: item rows whose lease and status changes are HOT updates.
--
-- Before this migration every pending → leased → completed change of an item row was a non-HOT
-- update (pg_stat_user_tables.n_tup_hot_upd = 0): status and lease_expires_at appear in index
-- predicates and keys, so each change wrote a new entry into the primary key, the (operation,
-- item) unique index and the partial index of leased rows, and the leased index kept every dead
-- entry until a vacuum. Now no index of the item table names a column the hot path changes:
-- leases live in assistant_operation_lease (one row per leased batch), failures are found by
-- their reason (only a failure sets it), and the table keeps free room in each page
-- (fillfactor) for the new row versions, which Postgres prunes within the page without vacuum.
--
-- Leases held when the migration runs move to the new table as they are.
CREATE TABLE "assistant_operation_lease" (
	"operation_id" uuid NOT NULL,
	"owner" text NOT NULL,
	"ordinals" integer[] NOT NULL,
	"remaining" integer NOT NULL,
	"expires_at" timestamp with time zone NOT NULL,
	CONSTRAINT "pk_assistant_operation_lease" PRIMARY KEY("operation_id","owner")
);
--> statement-breakpoint
DROP INDEX "idx_assistant_operation_item_leased";--> statement-breakpoint
DROP INDEX "idx_assistant_operation_item_failed";--> statement-breakpoint
ALTER TABLE "assistant_operation_lease" ADD CONSTRAINT "assistant_operation_lease_operation_id_assistant_operation_id_fk" FOREIGN KEY ("operation_id") REFERENCES "public"."assistant_operation"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "idx_assistant_operation_item_failure" ON "assistant_operation_item" USING btree ("operation_id","ordinal") WHERE reason IS NOT NULL;--> statement-breakpoint
INSERT INTO "assistant_operation_lease" ("operation_id", "owner", "ordinals", "remaining", "expires_at")
SELECT i."operation_id", i."lease_owner", array_agg(i."ordinal" ORDER BY i."ordinal"), count(*)::int,
       max(coalesce(i."lease_expires_at", now()))
FROM "assistant_operation_item" i JOIN "assistant_operation" o ON o."id" = i."operation_id"
WHERE i."status" = 'leased' AND i."lease_owner" IS NOT NULL
GROUP BY i."operation_id", i."lease_owner";--> statement-breakpoint
-- Room in each page for a row's next versions: at 50 % a page's rows can all be leased (and,
-- once the page is pruned, recorded) within the page. New pages only: existing rows stay where
-- they are.
ALTER TABLE "assistant_operation_item" SET (fillfactor = 50);
