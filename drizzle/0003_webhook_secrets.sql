CREATE TABLE "organization_webhook_secret" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"organization_id" uuid NOT NULL,
	"secret" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"expires_at" timestamp with time zone
);
--> statement-breakpoint
ALTER TABLE "organization_webhook_secret" ADD CONSTRAINT "organization_webhook_secret_organization_id_organization_id_fk" FOREIGN KEY ("organization_id") REFERENCES "public"."organization"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "idx_organization_webhook_secret_organization" ON "organization_webhook_secret" USING btree ("organization_id");--> statement-breakpoint
CREATE UNIQUE INDEX "uq_organization_webhook_secret_current" ON "organization_webhook_secret" USING btree ("organization_id") WHERE expires_at IS NULL;