CREATE TABLE "api_key" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"organization_id" uuid NOT NULL,
	"key_hash" text NOT NULL,
	"key_prefix" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"revoked_at" timestamp with time zone,
	CONSTRAINT "api_key_key_hash_unique" UNIQUE("key_hash")
);
--> statement-breakpoint
CREATE TABLE "assistant_conversation" (
	"id" uuid PRIMARY KEY NOT NULL,
	"organization_id" uuid NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "assistant_operation" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"conversation_id" uuid NOT NULL,
	"organization_id" uuid NOT NULL,
	"operation_type" varchar(64) NOT NULL,
	"status" varchar(32) NOT NULL,
	"total_items" integer NOT NULL,
	"completed_count" integer DEFAULT 0 NOT NULL,
	"failed_count" integer DEFAULT 0 NOT NULL,
	"state_json" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "ck_assistant_operation_status" CHECK (status IN ('active', 'paused', 'completed', 'cancelled'))
);
--> statement-breakpoint
CREATE TABLE "assistant_operation_item" (
	"operation_id" uuid NOT NULL,
	"ordinal" integer NOT NULL,
	"item_id" varchar(512) NOT NULL,
	"status" varchar(16) DEFAULT 'pending' NOT NULL,
	"attempts" integer DEFAULT 0 NOT NULL,
	"lease_owner" text,
	"lease_expires_at" timestamp with time zone,
	"reason" text,
	"result" jsonb,
	"updated_at" timestamp with time zone,
	CONSTRAINT "pk_assistant_operation_item" PRIMARY KEY("operation_id","ordinal"),
	CONSTRAINT "ck_assistant_operation_item_status" CHECK (status IN ('pending', 'leased', 'completed', 'failed', 'abandoned'))
);
--> statement-breakpoint
CREATE TABLE "operation_event" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"operation_id" uuid NOT NULL,
	"organization_id" uuid NOT NULL,
	"kind" varchar(32) NOT NULL,
	"actor" text NOT NULL,
	"data" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "organization" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"name" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "organization_name_unique" UNIQUE("name")
);
--> statement-breakpoint
ALTER TABLE "api_key" ADD CONSTRAINT "api_key_organization_id_organization_id_fk" FOREIGN KEY ("organization_id") REFERENCES "public"."organization"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "assistant_conversation" ADD CONSTRAINT "assistant_conversation_organization_id_organization_id_fk" FOREIGN KEY ("organization_id") REFERENCES "public"."organization"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "assistant_operation" ADD CONSTRAINT "assistant_operation_conversation_id_assistant_conversation_id_fk" FOREIGN KEY ("conversation_id") REFERENCES "public"."assistant_conversation"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "assistant_operation" ADD CONSTRAINT "assistant_operation_organization_id_organization_id_fk" FOREIGN KEY ("organization_id") REFERENCES "public"."organization"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "operation_event" ADD CONSTRAINT "operation_event_operation_id_assistant_operation_id_fk" FOREIGN KEY ("operation_id") REFERENCES "public"."assistant_operation"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "operation_event" ADD CONSTRAINT "operation_event_organization_id_organization_id_fk" FOREIGN KEY ("organization_id") REFERENCES "public"."organization"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "idx_api_key_organization" ON "api_key" USING btree ("organization_id");--> statement-breakpoint
CREATE INDEX "idx_assistant_conversation_organization" ON "assistant_conversation" USING btree ("organization_id");--> statement-breakpoint
CREATE INDEX "idx_assistant_operation_conversation" ON "assistant_operation" USING btree ("conversation_id");--> statement-breakpoint
CREATE INDEX "idx_assistant_operation_org_active" ON "assistant_operation" USING btree ("organization_id","status") WHERE status = 'active';--> statement-breakpoint
CREATE UNIQUE INDEX "uq_assistant_operation_one_active" ON "assistant_operation" USING btree ("conversation_id") WHERE status = 'active';--> statement-breakpoint
CREATE UNIQUE INDEX "uq_assistant_operation_item_id" ON "assistant_operation_item" USING btree ("operation_id","item_id");--> statement-breakpoint
CREATE INDEX "idx_assistant_operation_item_leased" ON "assistant_operation_item" USING btree ("operation_id","lease_expires_at") WHERE status = 'leased';--> statement-breakpoint
CREATE INDEX "idx_assistant_operation_item_failed" ON "assistant_operation_item" USING btree ("operation_id","ordinal") WHERE status = 'failed';--> statement-breakpoint
CREATE INDEX "idx_operation_event_operation" ON "operation_event" USING btree ("operation_id","id");