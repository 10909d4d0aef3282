-- A conversation is (organization_id, id): two organizations that use the same id have two
-- conversations that never meet. assistant_conversation's key becomes (organization_id, id); every
-- table that belongs to a conversation gets a composite foreign key to it; scratchpad is keyed by
-- (organization_id, conversation_id), and scratchpad_version gains organization_id for its key.
--
-- Existing rows keep their ids: before this migration a conversation id was global, so each
-- conversation already is the one (organization, id) pair its rows name. Runs in the migrator's
-- transaction: a failure leaves the previous schema as it was.
ALTER TABLE "assistant_execution" DROP CONSTRAINT "assistant_execution_conversation_id_assistant_conversation_id_fk";
--> statement-breakpoint
ALTER TABLE "assistant_operation" DROP CONSTRAINT "assistant_operation_conversation_id_assistant_conversation_id_fk";
--> statement-breakpoint
ALTER TABLE "context_render" DROP CONSTRAINT "context_render_conversation_id_assistant_conversation_id_fk";
--> statement-breakpoint
ALTER TABLE "scratchpad" DROP CONSTRAINT "scratchpad_conversation_id_assistant_conversation_id_fk";
--> statement-breakpoint
ALTER TABLE "scratchpad_event" DROP CONSTRAINT "scratchpad_event_conversation_id_assistant_conversation_id_fk";
--> statement-breakpoint
ALTER TABLE "scratchpad_note" DROP CONSTRAINT "scratchpad_note_conversation_id_assistant_conversation_id_fk";
--> statement-breakpoint
ALTER TABLE "scratchpad_trace" DROP CONSTRAINT "scratchpad_trace_conversation_id_assistant_conversation_id_fk";
--> statement-breakpoint
ALTER TABLE "scratchpad_version" DROP CONSTRAINT "scratchpad_version_conversation_id_scratchpad_conversation_id_fk";
--> statement-breakpoint
-- The new primary key leads with organization_id: it serves what this index did.
DROP INDEX "idx_assistant_conversation_organization";--> statement-breakpoint
DROP INDEX "uq_assistant_operation_one_active";--> statement-breakpoint
ALTER TABLE "assistant_conversation" DROP CONSTRAINT "assistant_conversation_pkey";--> statement-breakpoint
ALTER TABLE "scratchpad" DROP CONSTRAINT "scratchpad_pkey";--> statement-breakpoint
ALTER TABLE "scratchpad_version" DROP CONSTRAINT "pk_scratchpad_version";--> statement-breakpoint
ALTER TABLE "assistant_conversation" ADD CONSTRAINT "pk_assistant_conversation" PRIMARY KEY("organization_id","id");--> statement-breakpoint
ALTER TABLE "scratchpad" ADD CONSTRAINT "pk_scratchpad" PRIMARY KEY("organization_id","conversation_id");--> statement-breakpoint
-- Each version takes its pad's organization (conversation_id was the pad's key until now).
ALTER TABLE "scratchpad_version" ADD COLUMN "organization_id" uuid;--> statement-breakpoint
UPDATE "scratchpad_version" v SET "organization_id" = s."organization_id"
FROM "scratchpad" s WHERE s."conversation_id" = v."conversation_id";--> statement-breakpoint
-- A version whose pad is gone could not exist (its foreign key cascaded); none is kept if one does.
DELETE FROM "scratchpad_version" WHERE "organization_id" IS NULL;--> statement-breakpoint
ALTER TABLE "scratchpad_version" ALTER COLUMN "organization_id" SET NOT NULL;--> statement-breakpoint
ALTER TABLE "scratchpad_version" ADD CONSTRAINT "pk_scratchpad_version" PRIMARY KEY("organization_id","conversation_id","version");--> statement-breakpoint
-- opspad never wrote a row whose organization differs from its conversation's (every write
-- checked the owner first). Should a database hold one anyway, it becomes a row of a
-- conversation of its own organization (how every query reads it) instead of failing the upgrade.
INSERT INTO "assistant_conversation" ("id", "organization_id")
SELECT "conversation_id", "organization_id" FROM "assistant_operation"
UNION SELECT "conversation_id", "organization_id" FROM "assistant_execution"
UNION SELECT "conversation_id", "organization_id" FROM "scratchpad_note"
UNION SELECT "conversation_id", "organization_id" FROM "scratchpad_trace"
UNION SELECT "conversation_id", "organization_id" FROM "scratchpad"
UNION SELECT "conversation_id", "organization_id" FROM "scratchpad_event"
UNION SELECT "conversation_id", "organization_id" FROM "context_render"
ON CONFLICT DO NOTHING;--> statement-breakpoint
ALTER TABLE "assistant_execution" ADD CONSTRAINT "fk_assistant_execution_conversation" FOREIGN KEY ("organization_id","conversation_id") REFERENCES "public"."assistant_conversation"("organization_id","id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "assistant_operation" ADD CONSTRAINT "fk_assistant_operation_conversation" FOREIGN KEY ("organization_id","conversation_id") REFERENCES "public"."assistant_conversation"("organization_id","id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "context_render" ADD CONSTRAINT "fk_context_render_conversation" FOREIGN KEY ("organization_id","conversation_id") REFERENCES "public"."assistant_conversation"("organization_id","id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "scratchpad" ADD CONSTRAINT "fk_scratchpad_conversation" FOREIGN KEY ("organization_id","conversation_id") REFERENCES "public"."assistant_conversation"("organization_id","id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "scratchpad_event" ADD CONSTRAINT "fk_scratchpad_event_conversation" FOREIGN KEY ("organization_id","conversation_id") REFERENCES "public"."assistant_conversation"("organization_id","id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "scratchpad_note" ADD CONSTRAINT "fk_scratchpad_note_conversation" FOREIGN KEY ("organization_id","conversation_id") REFERENCES "public"."assistant_conversation"("organization_id","id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "scratchpad_trace" ADD CONSTRAINT "fk_scratchpad_trace_conversation" FOREIGN KEY ("organization_id","conversation_id") REFERENCES "public"."assistant_conversation"("organization_id","id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "scratchpad_version" ADD CONSTRAINT "fk_scratchpad_version_scratchpad" FOREIGN KEY ("organization_id","conversation_id") REFERENCES "public"."scratchpad"("organization_id","conversation_id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
-- One active operation per conversation, now per (conversation, organization).
CREATE UNIQUE INDEX "uq_assistant_operation_one_active" ON "assistant_operation" USING btree ("conversation_id","organization_id") WHERE status = 'active';
