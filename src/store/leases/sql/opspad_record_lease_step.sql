-- A worker's record and its lane's next lease in one call: records as opspad_record_step does,
-- leases as opspad_lease_step does, updates the operation row once (counters and cursor) and
-- commits once. Declines (no row, nothing changed) exactly when opspad_record_step would. When
-- the record goes through but the lease is not the usual case, the record stands and `lease` says
-- 'declined' (the caller leases on its own); 'none': no item is pending at all (the cursor moves
-- to the end); 'leased' comes with the batch's ids. p_whole: the report is the caller's whole
-- lease, named by its size and first id (opspad_record_owned).
-- Lock order: the operation row (FOR KEY SHARE) → the report's item rows and the owner's lease
-- row → the operation row's update lock, held to the commit → the spent lease rows → the owner's
-- next lease row → the events and the operation row's update, last.
CREATE OR REPLACE FUNCTION opspad_record_lease_step(p_operation uuid, p_organization uuid, p_conversation uuid, p_owner text, p_ids text[], p_reasons text[], p_lease_seconds double precision, p_limit integer, p_epoch integer, p_whole integer DEFAULT NULL::integer)
 RETURNS TABLE(id uuid, conversation_id uuid, organization_id uuid, operation_type character varying, status character varying, total_items integer, completed_count integer, failed_count integer, state_json jsonb, created_at timestamp with time zone, updated_at timestamp with time zone, in_flight integer, item_ids text[], lease text)
 LANGUAGE plpgsql
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
#variable_conflict use_column
DECLARE
  op "assistant_operation"%ROWTYPE;
  done_completed integer;
  done_failed integer;
  taken_ordinals integer[];
  taken_ids text[];
  pending_now integer;
  lease_state text := 'declined';
  new_cursor integer;
  owned record;
  taken record;
BEGIN
  SELECT * INTO op FROM "assistant_operation" o
  WHERE o.id = p_operation AND o.organization_id = p_organization AND o.conversation_id = p_conversation
  FOR KEY SHARE;
  IF NOT FOUND OR NOT opspad_record_usual(op.status, op.state_json, p_ids) THEN
    RETURN;
  END IF;
  owned := opspad_record_owned(p_operation, p_owner, p_ids, p_reasons, p_whole);
  done_completed := owned.done_completed;
  done_failed := owned.done_failed;

  -- From here the call holds the row's update lock, which its last statement needs anyway:
  -- leases of the operation take turns (opspad_lease_from_cursor), and other spent lease rows,
  -- which leases drop too, are dropped under it (opspad_record_owned has dropped the caller's
  -- own, which only the caller writes). Status and state are read again with it: an
  -- admission's pause of the conversation's active operation (operation-admission.ts) takes no
  -- lock that waits for this call's key-share lock, and may have committed since the first read.
  SELECT o.status, o.state_json INTO op.status, op.state_json FROM "assistant_operation" o
  WHERE o.id = p_operation FOR NO KEY UPDATE;
  DELETE FROM "assistant_operation_lease" WHERE operation_id = p_operation AND remaining <= 0;

  -- The lease, on opspad_lease_step's condition (opspad_lease_usual); the owner's own lease
  -- row, spent by the record, is gone by now.
  IF (opspad_lease_usual(p_operation, p_owner, op.status, op.state_json, p_epoch)).usual THEN
    taken := opspad_lease_from_cursor(p_operation, p_owner, p_lease_seconds, (op.state_json->>'cursor')::integer,
                                      coalesce(p_limit, (op.state_json->>'batch_size')::integer));
    taken_ordinals := taken.taken_ordinals;
    taken_ids := taken.taken_ids;
    IF taken_ordinals IS NOT NULL THEN
      lease_state := 'leased';
      new_cursor := taken_ordinals[cardinality(taken_ordinals)] + 1;
    ELSE
      -- Nothing from the cursor: "no batch" only when no item is pending at all, with this
      -- call's own record added to the row's counters.
      SELECT p.pending INTO pending_now
      FROM opspad_pending_items(p_operation, op.total_items,
                                op.completed_count + done_completed + op.failed_count + done_failed, op.state_json) p;
      IF pending_now <= 0 THEN
        lease_state := 'none';
        new_cursor := op.total_items;
      END IF;
    END IF;
  END IF;

  -- Last: the events (the record's, then the lease's), and the operation row (the counters
  -- commute and the cursor only moves forward).
  RETURN QUERY
  WITH events AS (
    INSERT INTO "operation_event" (operation_id, organization_id, kind, actor, data)
    SELECT p_operation, p_organization, 'batch_recorded', p_owner, jsonb_build_object(
      'completed', done_completed, 'failed', done_failed, 'already_recorded', 0, 'lease_conflicts', 0)
    UNION ALL
    SELECT p_operation, p_organization, 'batch_leased', p_owner, jsonb_build_object(
      'count', cardinality(taken_ordinals), 'first_ordinal', taken_ordinals[1],
      'last_ordinal', taken_ordinals[cardinality(taken_ordinals)])
    WHERE lease_state = 'leased'),
  moved AS (
    UPDATE "assistant_operation" o
    SET completed_count = o.completed_count + done_completed, failed_count = o.failed_count + done_failed,
        state_json = opspad_cursor_forward(o.state_json, new_cursor),
        updated_at = now()
    WHERE o.id = p_operation
    RETURNING o.*)
  SELECT m.id, m.conversation_id, m.organization_id, m.operation_type, m.status, m.total_items,
         m.completed_count, m.failed_count, m.state_json, m.created_at, m.updated_at,
         (SELECT coalesce(sum(l.remaining), 0)::integer FROM "assistant_operation_lease" l
          WHERE l.operation_id = p_operation AND l.remaining > 0),
         coalesce(taken_ids, ARRAY[]::text[]), lease_state
  FROM moved m;
END
$function$;
