CREATE TABLE "assistant_execution" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"conversation_id" uuid NOT NULL,
	"organization_id" uuid NOT NULL,
	"status" varchar(16) DEFAULT 'running' NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"ended_at" timestamp with time zone,
	CONSTRAINT "ck_assistant_execution_status" CHECK (status IN ('running', 'ended'))
);
--> statement-breakpoint
CREATE TABLE "context_render" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"conversation_id" uuid NOT NULL,
	"organization_id" uuid NOT NULL,
	"pad_version" integer NOT NULL,
	"chars" integer NOT NULL,
	"sha256" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "scratchpad" (
	"conversation_id" uuid PRIMARY KEY NOT NULL,
	"organization_id" uuid NOT NULL,
	"version" integer NOT NULL,
	"pad" jsonb NOT NULL,
	"settings" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"writes_since_reorganize" integer DEFAULT 0 NOT NULL,
	"reorganized_version" integer DEFAULT 0 NOT NULL,
	"recitation" jsonb,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "scratchpad_event" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"conversation_id" uuid NOT NULL,
	"organization_id" uuid NOT NULL,
	"kind" varchar(32) NOT NULL,
	"status" varchar(32) NOT NULL,
	"data" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "scratchpad_note" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"conversation_id" uuid NOT NULL,
	"organization_id" uuid NOT NULL,
	"execution_id" uuid,
	"persistent" boolean DEFAULT false NOT NULL,
	"text" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "scratchpad_trace" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"conversation_id" uuid NOT NULL,
	"organization_id" uuid NOT NULL,
	"execution_id" uuid,
	"kind" varchar(8) NOT NULL,
	"notes" text,
	"at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "ck_scratchpad_trace_kind" CHECK (kind IN ('read', 'write'))
);
--> statement-breakpoint
CREATE TABLE "scratchpad_version" (
	"conversation_id" uuid NOT NULL,
	"version" integer NOT NULL,
	"pad" jsonb NOT NULL,
	"source" varchar(32) NOT NULL,
	"reason" text NOT NULL,
	"metadata" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "pk_scratchpad_version" PRIMARY KEY("conversation_id","version")
);
--> statement-breakpoint
ALTER TABLE "assistant_execution" ADD CONSTRAINT "assistant_execution_conversation_id_assistant_conversation_id_fk" FOREIGN KEY ("conversation_id") REFERENCES "public"."assistant_conversation"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "assistant_execution" ADD CONSTRAINT "assistant_execution_organization_id_organization_id_fk" FOREIGN KEY ("organization_id") REFERENCES "public"."organization"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "context_render" ADD CONSTRAINT "context_render_conversation_id_assistant_conversation_id_fk" FOREIGN KEY ("conversation_id") REFERENCES "public"."assistant_conversation"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "context_render" ADD CONSTRAINT "context_render_organization_id_organization_id_fk" FOREIGN KEY ("organization_id") REFERENCES "public"."organization"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "scratchpad" ADD CONSTRAINT "scratchpad_conversation_id_assistant_conversation_id_fk" FOREIGN KEY ("conversation_id") REFERENCES "public"."assistant_conversation"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "scratchpad" ADD CONSTRAINT "scratchpad_organization_id_organization_id_fk" FOREIGN KEY ("organization_id") REFERENCES "public"."organization"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "scratchpad_event" ADD CONSTRAINT "scratchpad_event_conversation_id_assistant_conversation_id_fk" FOREIGN KEY ("conversation_id") REFERENCES "public"."assistant_conversation"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "scratchpad_event" ADD CONSTRAINT "scratchpad_event_organization_id_organization_id_fk" FOREIGN KEY ("organization_id") REFERENCES "public"."organization"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "scratchpad_note" ADD CONSTRAINT "scratchpad_note_conversation_id_assistant_conversation_id_fk" FOREIGN KEY ("conversation_id") REFERENCES "public"."assistant_conversation"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "scratchpad_note" ADD CONSTRAINT "scratchpad_note_organization_id_organization_id_fk" FOREIGN KEY ("organization_id") REFERENCES "public"."organization"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "scratchpad_note" ADD CONSTRAINT "scratchpad_note_execution_id_assistant_execution_id_fk" FOREIGN KEY ("execution_id") REFERENCES "public"."assistant_execution"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "scratchpad_trace" ADD CONSTRAINT "scratchpad_trace_conversation_id_assistant_conversation_id_fk" FOREIGN KEY ("conversation_id") REFERENCES "public"."assistant_conversation"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "scratchpad_trace" ADD CONSTRAINT "scratchpad_trace_organization_id_organization_id_fk" FOREIGN KEY ("organization_id") REFERENCES "public"."organization"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "scratchpad_trace" ADD CONSTRAINT "scratchpad_trace_execution_id_assistant_execution_id_fk" FOREIGN KEY ("execution_id") REFERENCES "public"."assistant_execution"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "scratchpad_version" ADD CONSTRAINT "scratchpad_version_conversation_id_scratchpad_conversation_id_fk" FOREIGN KEY ("conversation_id") REFERENCES "public"."scratchpad"("conversation_id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "idx_assistant_execution_conversation" ON "assistant_execution" USING btree ("conversation_id");--> statement-breakpoint
CREATE INDEX "idx_context_render_conversation" ON "context_render" USING btree ("conversation_id","id");--> statement-breakpoint
CREATE INDEX "idx_scratchpad_needs_reorganization" ON "scratchpad" USING btree ("updated_at") WHERE version > reorganized_version;--> statement-breakpoint
CREATE INDEX "idx_scratchpad_event_conversation" ON "scratchpad_event" USING btree ("conversation_id","id");--> statement-breakpoint
CREATE INDEX "idx_scratchpad_note_scope" ON "scratchpad_note" USING btree ("conversation_id","execution_id","id");--> statement-breakpoint
CREATE INDEX "idx_scratchpad_trace_execution" ON "scratchpad_trace" USING btree ("execution_id","id");