-- How many of an operation's items are pending and not leased, from its counters (p_recorded:
-- completed and failed, with whatever the caller has just recorded) less the abandoned and those
-- in flight in its lease rows; and how many are in flight. "No batch" means this is zero: the
-- step functions answer it from here, and the general lease's exclusive mode asks it before
-- looking behind the cursor (item-sql.ts countPending).
-- Cost: the operation's lease rows (one per lane) by primary key.
CREATE OR REPLACE FUNCTION opspad_pending_items(p_operation uuid, p_total integer, p_recorded integer, p_state jsonb, OUT pending integer, OUT in_flight integer)
 RETURNS record
 LANGUAGE plpgsql
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
BEGIN
  SELECT coalesce(sum(l.remaining), 0)::integer INTO in_flight
  FROM "assistant_operation_lease" l WHERE l.operation_id = p_operation AND l.remaining > 0;
  pending := p_total - p_recorded - coalesce((p_state->>'abandoned_count')::integer, 0) - in_flight;
END
$function$;
