-- assistant_operation_lease.max_ordinal: at least the highest ordinal a lease row holds, so a
-- lease from the cursor (opspad_lease_from_cursor) asks whether a live lease reaches past it from
-- the rows alone, without reading every live lease's ordinals. Rows already there get theirs from
-- their ordinals (-1 for an empty one, which holds nothing); opspad_write_lease writes it from now
-- on, replaced in this migration's transaction so no lease is written without it. The definition
-- is src/store/leases/sql/opspad_write_lease.sql's as of this migration; the file holds the current.
ALTER TABLE "assistant_operation_lease" ADD COLUMN "max_ordinal" integer;--> statement-breakpoint
UPDATE "assistant_operation_lease" SET "max_ordinal" = coalesce((SELECT max(o) FROM unnest("ordinals") AS o), -1);--> statement-breakpoint
ALTER TABLE "assistant_operation_lease" ALTER COLUMN "max_ordinal" SET NOT NULL;--> statement-breakpoint
CREATE OR REPLACE FUNCTION opspad_write_lease(p_operation uuid, p_owner text, p_ordinals integer[], p_lease_seconds double precision)
 RETURNS void
 LANGUAGE plpgsql
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
BEGIN
  INSERT INTO "assistant_operation_lease" AS l (operation_id, owner, ordinals, remaining, expires_at, max_ordinal)
  VALUES (p_operation, p_owner, p_ordinals, cardinality(p_ordinals),
          now() + make_interval(secs => p_lease_seconds), p_ordinals[cardinality(p_ordinals)])
  ON CONFLICT (operation_id, owner) DO UPDATE
  SET ordinals = l.ordinals || excluded.ordinals, remaining = l.remaining + excluded.remaining,
      expires_at = excluded.expires_at, max_ordinal = greatest(l.max_ordinal, excluded.max_ordinal);
END
$function$;
