-- A record in one round trip: the usual case of the general record transaction
-- (operation-record.ts), run where the data is. Goes ahead only when the record is the usual
-- case (opspad_record_usual) and for the caller's own leased items; raises SQLSTATE OPS01 when a report's ids were not all
-- recordable (rolling back what it wrote; the general path then decides id by id) and returns no
-- row when the case is not the usual one. p_reasons null: every id completed; otherwise one entry
-- per id, null for a completion, the reason for a failure. p_complete (a worker's record): when
-- the record leaves no item to record and the operation is active, it completes it too, with its
-- `completed` event, as the worker's complete-if-done would next (the statuses a test holds to
-- the lifecycle's complete_if_done).
-- Lock order: the operation row (FOR KEY SHARE) → the report's item rows and the owner's lease
-- row → the operation row's update lock, held to the commit → the spent lease rows → the events
-- (the record's, then the completion's) and the operation row's update, last.
CREATE OR REPLACE FUNCTION opspad_record_step(p_operation uuid, p_organization uuid, p_conversation uuid, p_owner text, p_ids text[], p_reasons text[], p_complete boolean DEFAULT false)
 RETURNS TABLE(id uuid, conversation_id uuid, organization_id uuid, operation_type character varying, status character varying, total_items integer, completed_count integer, failed_count integer, state_json jsonb, created_at timestamp with time zone, updated_at timestamp with time zone, in_flight integer)
 LANGUAGE plpgsql
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
#variable_conflict use_column
DECLARE
  op "assistant_operation"%ROWTYPE;
  done_completed integer;
  done_failed integer;
  finishing boolean;
  owned record;
BEGIN
  SELECT * INTO op FROM "assistant_operation" o
  WHERE o.id = p_operation AND o.organization_id = p_organization AND o.conversation_id = p_conversation
  FOR KEY SHARE;
  IF NOT FOUND OR NOT opspad_record_usual(op.status, op.state_json, p_ids) THEN
    RETURN;
  END IF;
  owned := opspad_record_owned(p_operation, p_owner, p_ids, p_reasons);
  done_completed := owned.done_completed;
  done_failed := owned.done_failed;
  -- The row's update lock, which the last statement needs anyway, before other spent lease rows
  -- (leases drop them too, holding it; opspad_record_owned has dropped the caller's own, which
  -- only the caller writes). Whether this record completes the operation is read under it: a
  -- pause that committed first wins.
  SELECT p_complete AND o.status IN ('active')
         AND o.total_items - o.completed_count - o.failed_count
             - coalesce((o.state_json->>'abandoned_count')::integer, 0) = done_completed + done_failed
  INTO finishing FROM "assistant_operation" o WHERE o.id = p_operation FOR NO KEY UPDATE;
  DELETE FROM "assistant_operation_lease" WHERE operation_id = p_operation AND remaining <= 0;
  -- Last: the events (the record's, then the completion's), and the operation row (the counters
  -- commute).
  RETURN QUERY
  WITH events AS (
    INSERT INTO "operation_event" (operation_id, organization_id, kind, actor, data)
    SELECT p_operation, p_organization, 'batch_recorded', p_owner, jsonb_build_object(
      'completed', done_completed, 'failed', done_failed, 'already_recorded', 0, 'lease_conflicts', 0)
    UNION ALL
    SELECT p_operation, p_organization, 'completed', 'worker', '{"forced": false, "abandoned": 0}'::jsonb
    WHERE finishing),
  counted AS (
    UPDATE "assistant_operation" o
    SET completed_count = o.completed_count + done_completed, failed_count = o.failed_count + done_failed,
        updated_at = now(), status = CASE WHEN finishing THEN 'completed' ELSE o.status END,
        state_json = CASE WHEN finishing THEN o.state_json - '{paused_reason,paused_by}'::text[]
                          ELSE o.state_json END
    WHERE o.id = p_operation
    RETURNING o.*)
  SELECT c.id, c.conversation_id, c.organization_id, c.operation_type, c.status, c.total_items,
         c.completed_count, c.failed_count, c.state_json, c.created_at, c.updated_at,
         (SELECT coalesce(sum(l.remaining), 0)::integer FROM "assistant_operation_lease" l
          WHERE l.operation_id = p_operation AND l.remaining > 0)
  FROM counted c;
END
$function$;
