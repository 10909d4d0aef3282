-- A lease row written for p_owner, holding p_ordinals until p_lease_seconds from now, or the
-- owner's row extended by them: the one statement both leases write it with
-- (opspad_lease_from_cursor, opspad_lease_items), each with p_ordinals ascending (taken in
-- ordinal order), so the last is the batch's highest: the row's max_ordinal is the highest it was
-- ever given (reading it from the array cost 14 µs a batch of 100). Lock order: the owner's
-- lease row.
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
