-- The step functions' lease: up to p_limit pending items from p_from (the cursor as the caller
-- read it under the operation row's update lock, or further), leased to p_owner, its lease row
-- written (or extended); the ids and ordinals in ordinal order, null when none is found. The
-- caller holds the operation row's update lock, which every other lease takes too (the step
-- functions, the general lease: operation-row.ts lockOperationForLease), and so does the general
-- record, which may record items no lease holds (a late worker's report): leases take turns and
-- never run beside such a record, so the batch's item rows are read, not locked, and the cursor
-- the caller read is the last lease's. The step functions' records run beside it, but only of
-- their own live leases' items, which no lease from here takes.
-- When a live lease holds an ordinal at or past the scan's start (the cursor went back), the
-- general statement decides (opspad_lease_items: live leases hashed, rows SKIP LOCKED).
-- Lock order: the owner's lease row (the operation row is the caller's).
-- Cost: the batch's rows by primary key from the cursor, and the live lease rows (one per lane)
-- by the operation's key, their max_ordinal only. Measured on four connections leasing and
-- recording one operation, a lease that locked each row and hashed the live leases per candidate
-- was most of a call's time; reading every live lease's ordinals to ask whether one reaches past
-- the cursor took 145 µs a lease at batch 100 with 32 lanes, against 10 µs for the rows alone.
CREATE OR REPLACE FUNCTION opspad_lease_from_cursor(p_operation uuid, p_owner text, p_lease_seconds double precision, p_from integer, p_limit integer, OUT taken_ordinals integer[], OUT taken_ids text[])
 RETURNS record
 LANGUAGE plpgsql
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
BEGIN
  IF EXISTS (SELECT 1 FROM "assistant_operation_lease" l
             WHERE l.operation_id = p_operation AND l.remaining > 0 AND l.max_ordinal >= p_from) THEN
    SELECT array_agg(t.leased_ordinal ORDER BY t.leased_ordinal), array_agg(t.leased_item_id ORDER BY t.leased_ordinal)
    INTO taken_ordinals, taken_ids
    FROM opspad_lease_items(p_operation, p_owner, p_lease_seconds, p_from, p_limit, true) t;
    RETURN;
  END IF;
  SELECT array_agg(s.ordinal ORDER BY s.ordinal), array_agg(s.item_id ORDER BY s.ordinal)
  INTO taken_ordinals, taken_ids
  FROM (SELECT i.ordinal, i.item_id::text AS item_id FROM "assistant_operation_item" i
        WHERE i.operation_id = p_operation AND i.status = 'pending' AND i.ordinal >= p_from
        ORDER BY i.ordinal LIMIT p_limit) s;
  IF taken_ordinals IS NULL THEN
    RETURN;
  END IF;
  PERFORM opspad_write_lease(p_operation, p_owner, taken_ordinals, p_lease_seconds);
END
$function$;
