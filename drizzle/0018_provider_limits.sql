CREATE TABLE "operation_throttle" (
	"operation_id" uuid PRIMARY KEY NOT NULL,
	"limit_key" text NOT NULL,
	"reason" varchar(16) NOT NULL,
	"rate_max" integer,
	"rate_interval_ms" integer,
	"concurrency" integer,
	"until" timestamp with time zone NOT NULL
);
--> statement-breakpoint
CREATE TABLE "operator_bulk_action" (
	"id" uuid PRIMARY KEY NOT NULL,
	"action" varchar(16) NOT NULL,
	"filter" jsonb NOT NULL,
	"actor" text NOT NULL,
	"status" varchar(16) DEFAULT 'running' NOT NULL,
	"matched" integer NOT NULL,
	"applied" integer DEFAULT 0 NOT NULL,
	"skipped" integer DEFAULT 0 NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"finished_at" timestamp with time zone
);
--> statement-breakpoint
CREATE TABLE "operator_bulk_action_target" (
	"bulk_action_id" uuid NOT NULL,
	"operation_id" uuid NOT NULL,
	"organization_id" uuid NOT NULL,
	"state" varchar(16) DEFAULT 'pending' NOT NULL,
	"detail" text,
	CONSTRAINT "pk_operator_bulk_action_target" PRIMARY KEY("bulk_action_id","operation_id")
);
--> statement-breakpoint
CREATE TABLE "organization_key_limit" (
	"organization_id" uuid NOT NULL,
	"operation_type" varchar(100) NOT NULL,
	"limit_key" text DEFAULT '' NOT NULL,
	"rate_max" integer,
	"rate_interval_ms" integer,
	"concurrency" integer,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "pk_organization_key_limit" PRIMARY KEY("organization_id","operation_type","limit_key"),
	CONSTRAINT "organization_key_limit_rate_pair" CHECK (("organization_key_limit"."rate_max" IS NULL) = ("organization_key_limit"."rate_interval_ms" IS NULL))
);
--> statement-breakpoint
ALTER TABLE "organization_quota" ADD COLUMN "fair_share_weight" integer;--> statement-breakpoint
ALTER TABLE "operation_throttle" ADD CONSTRAINT "operation_throttle_operation_id_assistant_operation_id_fk" FOREIGN KEY ("operation_id") REFERENCES "public"."assistant_operation"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "operator_bulk_action_target" ADD CONSTRAINT "operator_bulk_action_target_bulk_action_id_operator_bulk_action_id_fk" FOREIGN KEY ("bulk_action_id") REFERENCES "public"."operator_bulk_action"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "organization_key_limit" ADD CONSTRAINT "organization_key_limit_organization_id_organization_id_fk" FOREIGN KEY ("organization_id") REFERENCES "public"."organization"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "idx_operator_bulk_action_created" ON "operator_bulk_action" USING btree ("created_at");