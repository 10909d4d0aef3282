-- Consent before bulk side effects: an organization's approval threshold (background operations
-- of more items wait for a person), and the status of an operation that waits.
ALTER TABLE "organization" ADD COLUMN "approve_above" integer;--> statement-breakpoint
ALTER TABLE "organization" ADD CONSTRAINT "ck_organization_approve_above" CHECK (approve_above IS NULL OR approve_above >= 0);--> statement-breakpoint
ALTER TABLE "assistant_operation" DROP CONSTRAINT "ck_assistant_operation_status";--> statement-breakpoint
ALTER TABLE "assistant_operation" ADD CONSTRAINT "ck_assistant_operation_status" CHECK (status IN ('active', 'paused', 'completed', 'cancelled', 'awaiting_approval'));
