-- A lease and a record in one round trip each.
--
-- A lease was five round trips (begin, lock, lease, tail, commit) and a record five; on a
-- two-core machine shared by the workers and Postgres, each round trip cost more CPU than a
-- batch's rows (socket writes on both sides), and the operation row's lock was held across the
-- client's round trips. These functions run the usual case of each — the same statements, in the
-- same lock order — where the data is, as one autocommitted call: the operation row (FOR KEY
-- SHARE) → the batch's item rows and the owner's lease row → the event, the spent lease rows and
-- the operation row's update last.
--
-- Each returns no row, having changed nothing, whenever the case is not the usual one; the
-- caller then runs the general transaction (src/store/operation-lease.ts,
-- src/store/operation-record.ts), which decides that case exactly as before. The conditions
-- are those under which the general path would run exactly these statements.
--
-- A lease (opspad_lease_step) goes ahead only when the operation is active, in the caller's
-- dispatch epoch, has no expired lease, the caller holds no lease row (nothing to renew) and a
-- pending item is found from the cursor. p_limit null: the operation's batch size; p_epoch null:
-- any epoch (an assistant's progress).
CREATE FUNCTION "opspad_lease_step"(
  p_operation uuid, p_organization uuid, p_conversation uuid, p_owner text,
  p_lease_seconds double precision, p_limit integer, p_epoch integer)
RETURNS TABLE (
  id uuid, conversation_id uuid, organization_id uuid, operation_type varchar, status varchar,
  total_items integer, completed_count integer, failed_count integer, state_json jsonb,
  created_at timestamptz, updated_at timestamptz, in_flight integer, item_ids text[])
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  op "assistant_operation"%ROWTYPE;
  taken_ordinals integer[];
  taken_ids text[];
BEGIN
  SELECT * INTO op FROM "assistant_operation" o
  WHERE o.id = p_operation AND o.organization_id = p_organization AND o.conversation_id = p_conversation
  FOR KEY SHARE;
  IF NOT FOUND OR op.status <> 'active'
     OR (p_epoch IS NOT NULL AND op.state_json->'dispatch_epoch' IS DISTINCT FROM to_jsonb(p_epoch)) THEN
    RETURN;
  END IF;
  IF EXISTS (SELECT 1 FROM "assistant_operation_lease" l
             WHERE l.operation_id = p_operation
               AND (l.owner = p_owner OR (l.remaining > 0 AND l.expires_at < now()))) THEN
    RETURN;
  END IF;
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
  IF taken_ordinals IS NULL THEN
    RETURN;
  END IF;
  INSERT INTO "operation_event" (operation_id, organization_id, kind, actor, data)
  VALUES (p_operation, p_organization, 'batch_leased', p_owner, jsonb_build_object(
    'count', cardinality(taken_ordinals), 'first_ordinal', taken_ordinals[1],
    'last_ordinal', taken_ordinals[cardinality(taken_ordinals)]));
  DELETE FROM "assistant_operation_lease" WHERE operation_id = p_operation AND remaining <= 0;
  -- Last: concurrent leases wait for each other only on this update; the cursor only moves forward.
  RETURN QUERY
  WITH moved AS (
    UPDATE "assistant_operation" o
    SET state_json = jsonb_set(o.state_json, '{cursor}', to_jsonb(GREATEST(
          (o.state_json->>'cursor')::integer, taken_ordinals[cardinality(taken_ordinals)] + 1))),
        updated_at = now()
    WHERE o.id = p_operation
    RETURNING o.*)
  SELECT m.id, m.conversation_id, m.organization_id, m.operation_type, m.status, m.total_items,
         m.completed_count, m.failed_count, m.state_json, m.created_at, m.updated_at,
         (SELECT coalesce(sum(l.remaining), 0)::integer FROM "assistant_operation_lease" l
          WHERE l.operation_id = p_operation AND l.remaining > 0),
         taken_ids
  FROM moved m;
END
$$;
--> statement-breakpoint
-- A record (opspad_record_step) goes ahead only when the operation may be recorded (active or
-- paused), has no circuit breaker (its window is read-modify-write: records take turns), and
-- every id of the report is recorded. Otherwise it changes nothing: no row when nothing was
-- written, and SQLSTATE OPS01 when a report's ids were not all recordable, which rolls back the
-- rows it had recorded (the general path then says why, id by id).
-- p_reasons is null when every id completed; otherwise one entry per id: null for a completion,
-- the reason for a failure.
CREATE FUNCTION "opspad_record_step"(
  p_operation uuid, p_organization uuid, p_conversation uuid, p_owner text,
  p_ids text[], p_reasons text[])
RETURNS TABLE (
  id uuid, conversation_id uuid, organization_id uuid, operation_type varchar, status varchar,
  total_items integer, completed_count integer, failed_count integer, state_json jsonb,
  created_at timestamptz, updated_at timestamptz, in_flight integer)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  op "assistant_operation"%ROWTYPE;
  done_completed integer;
  done_failed integer;
BEGIN
  SELECT * INTO op FROM "assistant_operation" o
  WHERE o.id = p_operation AND o.organization_id = p_organization AND o.conversation_id = p_conversation
  FOR KEY SHARE;
  IF NOT FOUND OR coalesce(cardinality(p_ids), 0) = 0 OR op.status NOT IN ('active', 'paused')
     OR coalesce((op.state_json->>'max_failure_rate')::double precision, 0) > 0 THEN
    RETURN;
  END IF;
  -- An item is recordable when pending, leased to the reporter, or its lease has expired; each
  -- recorded item counts down the lease of the owner its row still names.
  IF p_reasons IS NULL THEN
    -- Completions only: no reason column changes, so the update is HOT.
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
  -- Last: concurrent records wait for each other only on this update; the counters commute.
  RETURN QUERY
  WITH counted AS (
    UPDATE "assistant_operation" o
    SET completed_count = o.completed_count + done_completed, failed_count = o.failed_count + done_failed,
        updated_at = now()
    WHERE o.id = p_operation
    RETURNING o.*)
  SELECT c.id, c.conversation_id, c.organization_id, c.operation_type, c.status, c.total_items,
         c.completed_count, c.failed_count, c.state_json, c.created_at, c.updated_at,
         (SELECT coalesce(sum(l.remaining), 0)::integer FROM "assistant_operation_lease" l
          WHERE l.operation_id = p_operation AND l.remaining > 0)
  FROM counted c;
END
$$;
