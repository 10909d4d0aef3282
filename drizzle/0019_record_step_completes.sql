-- opspad_record_step takes a seventh argument, p_complete (default false): a worker's record
-- that leaves nothing to record completes an active operation in the same call, where the worker
-- then completed it in a statement of its own. A change of arguments is a new function: the old
-- one is dropped and the new one created in this migration's transaction, so no moment is
-- without one, and a process of the release before, calling with six arguments, gets the new
-- function with p_complete false, which does what the old one did. The definition is
-- src/store/leases/sql/opspad_record_step.sql's as of this migration; the file holds the current.
DROP FUNCTION IF EXISTS "opspad_record_step"(uuid, uuid, uuid, text, text[], text[]);--> statement-breakpoint
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
BEGIN
  SELECT * INTO op FROM "assistant_operation" o
  WHERE o.id = p_operation AND o.organization_id = p_organization AND o.conversation_id = p_conversation
  FOR KEY SHARE;
  IF NOT FOUND OR NOT opspad_record_usual(op.status, op.state_json, p_ids) THEN
    RETURN;
  END IF;
  SELECT r.done_completed, r.done_failed INTO done_completed, done_failed
  FROM opspad_record_owned(p_operation, p_owner, p_ids, p_reasons) r;
  -- The row's update lock, which the last statement needs anyway, before the spent lease rows
  -- (leases drop them too, holding it).
  PERFORM 1 FROM "assistant_operation" o WHERE o.id = p_operation FOR NO KEY UPDATE;
  INSERT INTO "operation_event" (operation_id, organization_id, kind, actor, data)
  VALUES (p_operation, p_organization, 'batch_recorded', p_owner, jsonb_build_object(
    'completed', done_completed, 'failed', done_failed, 'already_recorded', 0, 'lease_conflicts', 0));
  DELETE FROM "assistant_operation_lease" WHERE operation_id = p_operation AND remaining <= 0;
  -- Last: the counters commute. The completion reads the row as this update finds it, under the
  -- update lock: a pause that committed first wins.
  RETURN QUERY
  WITH counted AS (
    UPDATE "assistant_operation" o
    SET completed_count = o.completed_count + done_completed, failed_count = o.failed_count + done_failed,
        updated_at = now(), status = CASE WHEN finishing.done THEN 'completed' ELSE o.status END,
        state_json = CASE WHEN finishing.done THEN o.state_json - '{paused_reason,paused_by}'::text[]
                          ELSE o.state_json END
    FROM (SELECT p_complete AND o2.status IN ('active')
                 AND o2.total_items - o2.completed_count - done_completed - o2.failed_count - done_failed
                     - coalesce((o2.state_json->>'abandoned_count')::integer, 0) = 0 AS done
          FROM "assistant_operation" o2 WHERE o2.id = p_operation) finishing
    WHERE o.id = p_operation
    RETURNING o.*, finishing.done),
  completed_event AS (
    INSERT INTO "operation_event" (operation_id, organization_id, kind, actor, data)
    SELECT c.id, p_organization, 'completed', 'worker', '{"forced": false, "abandoned": 0}'::jsonb
    FROM counted c WHERE c.done)
  SELECT c.id, c.conversation_id, c.organization_id, c.operation_type, c.status, c.total_items,
         c.completed_count, c.failed_count, c.state_json, c.created_at, c.updated_at,
         (SELECT coalesce(sum(l.remaining), 0)::integer FROM "assistant_operation_lease" l
          WHERE l.operation_id = p_operation AND l.remaining > 0)
  FROM counted c;
END
$function$;
