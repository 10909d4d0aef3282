-- A worker's record and its lane's next lease, in one call.
--
-- A worker that goes on with its lane's next batch (run-batch.ts's slices) called
-- opspad_record_step and then opspad_lease_step: two statements, two commits, and two updates of
-- the operation row per batch. At batch 100 that fixed part was most of Postgres' CPU per batch
-- and each call a socket write on both sides. This call records the report as opspad_record_step
-- does, then leases the next batch as opspad_lease_step does, then updates the operation row
-- once (counters and cursor together) and commits once.
--
-- It declines (returns no row, having changed nothing) exactly when opspad_record_step would:
-- the caller then records through the general transaction and leases on its own, as before.
-- When the record goes through but the lease is not the usual case (not active any more, another
-- lane generation, a lease of this owner still holding items, an expired lease to reclaim,
-- pending items not found from the cursor), the record stands and `lease` says 'declined': the
-- caller leases on its own. 'none' means no item is pending at all (the cursor moves to the end,
-- as opspad_lease_step moves it); 'leased' comes with the batch's ids.
--
-- Lock order: that of both calls — the operation row (FOR KEY SHARE) → the report's item rows and
-- their owners' lease rows → the next batch's item rows (SKIP LOCKED) and the owner's lease row →
-- the events, the spent lease rows and the operation row's update, last.
CREATE FUNCTION "opspad_record_lease_step"(
  p_operation uuid, p_organization uuid, p_conversation uuid, p_owner text,
  p_ids text[], p_reasons text[], p_lease_seconds double precision, p_limit integer, p_epoch integer)
RETURNS TABLE (
  id uuid, conversation_id uuid, organization_id uuid, operation_type varchar, status varchar,
  total_items integer, completed_count integer, failed_count integer, state_json jsonb,
  created_at timestamptz, updated_at timestamptz, in_flight integer, item_ids text[], lease text)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  op "assistant_operation"%ROWTYPE;
  done_completed integer;
  done_failed integer;
  taken_ordinals integer[];
  taken_ids text[];
  in_flight_now integer;
  lease_state text := 'declined';
  new_cursor integer;
BEGIN
  SELECT * INTO op FROM "assistant_operation" o
  WHERE o.id = p_operation AND o.organization_id = p_organization AND o.conversation_id = p_conversation
  FOR KEY SHARE;
  IF NOT FOUND OR coalesce(cardinality(p_ids), 0) = 0 OR op.status NOT IN ('active', 'paused')
     OR coalesce((op.state_json->>'max_failure_rate')::double precision, 0) > 0 THEN
    RETURN;
  END IF;
  -- The record: opspad_record_step's statements (drizzle/0008_step_functions.sql).
  IF p_reasons IS NULL THEN
    WITH recorded AS (
      UPDATE "assistant_operation_item" AS i
      SET status = 'completed', lease_expires_at = NULL, reason = NULL, updated_at = now()
      WHERE i.operation_id = p_operation AND i.item_id = ANY(p_ids)
        AND (i.status = 'pending' OR (i.status = 'leased' AND (i.lease_owner = p_owner OR i.lease_expires_at < now())))
      RETURNING i.lease_owner),
    counted AS (
      UPDATE "assistant_operation_lease" AS l SET remaining = l.remaining - c.n
      FROM (SELECT lease_owner, count(*)::integer AS n FROM recorded WHERE lease_owner IS NOT NULL GROUP BY lease_owner) c
      WHERE l.operation_id = p_operation AND l.owner = c.lease_owner)
    SELECT count(*)::integer, 0 INTO done_completed, done_failed FROM recorded;
  ELSE
    WITH recorded AS (
      UPDATE "assistant_operation_item" AS i
      SET status = CASE WHEN f.reason IS NULL THEN 'completed' ELSE 'failed' END,
          reason = f.reason, lease_expires_at = NULL, updated_at = now()
      FROM unnest(p_ids, p_reasons) AS f(item_id, reason)
      WHERE i.operation_id = p_operation AND i.item_id = ANY(p_ids) AND i.item_id = f.item_id
        AND (i.status = 'pending' OR (i.status = 'leased' AND (i.lease_owner = p_owner OR i.lease_expires_at < now())))
      RETURNING i.lease_owner, i.status),
    counted AS (
      UPDATE "assistant_operation_lease" AS l SET remaining = l.remaining - c.n
      FROM (SELECT lease_owner, count(*)::integer AS n FROM recorded WHERE lease_owner IS NOT NULL GROUP BY lease_owner) c
      WHERE l.operation_id = p_operation AND l.owner = c.lease_owner)
    SELECT count(*) FILTER (WHERE status = 'completed')::integer, count(*) FILTER (WHERE status = 'failed')::integer
    INTO done_completed, done_failed FROM recorded;
  END IF;
  IF done_completed + done_failed < cardinality(p_ids) THEN
    RAISE EXCEPTION 'not every id of the report was recordable' USING ERRCODE = 'OPS01';
  END IF;
  INSERT INTO "operation_event" (operation_id, organization_id, kind, actor, data)
  VALUES (p_operation, p_organization, 'batch_recorded', p_owner, jsonb_build_object(
    'completed', done_completed, 'failed', done_failed, 'already_recorded', 0, 'lease_conflicts', 0));
  DELETE FROM "assistant_operation_lease" WHERE operation_id = p_operation AND remaining <= 0;

  -- The lease: opspad_lease_step's statements (drizzle/0010_empty_lease_step.sql), on the same
  -- conditions; the owner's own lease row, spent by the record, is gone by now.
  IF op.status = 'active'
     AND (p_epoch IS NULL OR op.state_json->'dispatch_epoch' IS NOT DISTINCT FROM to_jsonb(p_epoch))
     AND NOT EXISTS (SELECT 1 FROM "assistant_operation_lease" l
                     WHERE l.operation_id = p_operation
                       AND (l.owner = p_owner OR (l.remaining > 0 AND l.expires_at < now()))) THEN
    WITH leased AS (
      UPDATE "assistant_operation_item"
      SET status = 'leased', lease_owner = p_owner, lease_expires_at = now() + make_interval(secs => p_lease_seconds),
          attempts = attempts + 1, updated_at = now()
      WHERE operation_id = p_operation AND ordinal = ANY(ARRAY(
        SELECT i.ordinal FROM "assistant_operation_item" i
        WHERE i.operation_id = p_operation AND i.status = 'pending'
          AND i.ordinal >= (op.state_json->>'cursor')::integer
        ORDER BY i.ordinal LIMIT coalesce(p_limit, (op.state_json->>'batch_size')::integer)
        FOR UPDATE SKIP LOCKED))
      RETURNING ordinal, item_id),
    lease AS (
      INSERT INTO "assistant_operation_lease" (operation_id, owner, ordinals, remaining, expires_at)
      SELECT p_operation, p_owner, array_agg(ordinal), count(*), now() + make_interval(secs => p_lease_seconds)
      FROM leased HAVING count(*) > 0
      ON CONFLICT (operation_id, owner) DO UPDATE
      SET ordinals = "assistant_operation_lease".ordinals || excluded.ordinals,
          remaining = "assistant_operation_lease".remaining + excluded.remaining, expires_at = excluded.expires_at)
    SELECT array_agg(ordinal ORDER BY ordinal), array_agg(item_id ORDER BY ordinal)
    INTO taken_ordinals, taken_ids FROM leased;
    IF taken_ordinals IS NOT NULL THEN
      lease_state := 'leased';
      new_cursor := taken_ordinals[cardinality(taken_ordinals)] + 1;
      INSERT INTO "operation_event" (operation_id, organization_id, kind, actor, data)
      VALUES (p_operation, p_organization, 'batch_leased', p_owner, jsonb_build_object(
        'count', cardinality(taken_ordinals), 'first_ordinal', taken_ordinals[1],
        'last_ordinal', taken_ordinals[cardinality(taken_ordinals)]));
    ELSE
      -- Nothing from the cursor: "no batch" only when no item is pending at all, counted as
      -- opspad_lease_step counts it, with this call's own record added to the row's counters.
      SELECT coalesce(sum(l.remaining), 0)::integer INTO in_flight_now
      FROM "assistant_operation_lease" l WHERE l.operation_id = p_operation AND l.remaining > 0;
      IF op.total_items - op.completed_count - done_completed - op.failed_count - done_failed
         - coalesce((op.state_json->>'abandoned_count')::integer, 0) - in_flight_now <= 0 THEN
        lease_state := 'none';
        new_cursor := op.total_items;
      END IF;
    END IF;
  END IF;

  -- Last: concurrent calls wait for each other only on this update; the counters commute and
  -- the cursor only moves forward.
  RETURN QUERY
  WITH moved AS (
    UPDATE "assistant_operation" o
    SET completed_count = o.completed_count + done_completed, failed_count = o.failed_count + done_failed,
        state_json = CASE WHEN new_cursor IS NULL OR (o.state_json->>'cursor')::integer >= new_cursor THEN o.state_json
                          ELSE jsonb_set(o.state_json, '{cursor}', to_jsonb(new_cursor)) END,
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
$$;
