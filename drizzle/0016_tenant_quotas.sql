CREATE TABLE "organization_quota" (
	"organization_id" uuid PRIMARY KEY NOT NULL,
	"stored_items" bigint DEFAULT 0 NOT NULL,
	"max_stored_items" bigint,
	"max_open_operations" integer,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "organization_quota" ADD CONSTRAINT "organization_quota_organization_id_organization_id_fk" FOREIGN KEY ("organization_id") REFERENCES "public"."organization"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "idx_assistant_operation_org_open" ON "assistant_operation" USING btree ("organization_id") WHERE status IN ('active', 'paused', 'awaiting_approval');--> statement-breakpoint
-- Each organization's stored items as they are now: the items of operations retention has not pruned.
INSERT INTO "organization_quota" ("organization_id", "stored_items")
SELECT "organization_id", sum("total_items") FROM "assistant_operation"
WHERE NOT ("state_json" ? 'items_pruned_at')
GROUP BY "organization_id";
