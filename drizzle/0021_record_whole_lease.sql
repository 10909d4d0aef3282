-- A worker whose batch completed whole names its lease by its size and first id instead of
-- sending every id: opspad_record_owned takes p_whole, and the two calls that record and lease
-- (opspad_record_lease_step, opspad_record_lease_steps) take it on, each as a last argument with
-- a default, so a process of the release before, calling with the arguments it knows, gets the
-- new functions doing what the old ones did. A change of arguments is a new function: the old
-- ones are dropped and the new ones created in this migration's transaction, so no moment is
-- without them. The definitions are those of the files under src/store/leases/sql/ as of this
-- migration; the files hold the current.
DROP FUNCTION IF EXISTS "opspad_record_lease_steps"(uuid, uuid, uuid, text[], integer[], text[], text[], double precision, integer[], integer);--> statement-breakpoint
DROP FUNCTION IF EXISTS "opspad_record_lease_step"(uuid, uuid, uuid, text, text[], text[], double precision, integer, integer);--> statement-breakpoint
DROP FUNCTION IF EXISTS "opspad_record_owned"(uuid, text, text[], text[]);--> statement-breakpoint
CREATE OR REPLACE FUNCTION opspad_record_owned(p_operation uuid, p_owner text, p_ids text[], p_reasons text[], p_whole integer DEFAULT NULL::integer, OUT done_completed integer, OUT done_failed integer)
 RETURNS record
 LANGUAGE plpgsql
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
DECLARE
  owned integer[];
  owned_count integer;
  recorded_ordinals integer[];
  ids_match boolean;
BEGIN
  SELECT l.ordinals, l.remaining INTO owned, owned_count FROM "assistant_operation_lease" l
  WHERE l.operation_id = p_operation AND l.owner = p_owner;
  IF p_whole IS NOT NULL THEN
    IF p_reasons IS NOT NULL OR coalesce(cardinality(p_ids), 0) <> 1 OR owned_count IS DISTINCT FROM p_whole
       OR cardinality(owned) <> p_whole OR owned[p_whole] - owned[1] + 1 <> p_whole THEN
      RAISE EXCEPTION 'not every id of the report was recordable' USING ERRCODE = 'OPS01';
    END IF;
    WITH recorded AS (
      UPDATE "assistant_operation_item" AS i
      SET status = 'completed', attempts = i.attempts + 1, reason = NULL, updated_at = now()
      WHERE i.operation_id = p_operation AND i.ordinal >= owned[1] AND i.ordinal <= owned[p_whole]
        AND i.status = 'pending'
      RETURNING i.ordinal, i.item_id)
    -- Every row recorded is the lease's ordinal at its place: with the count, the lease is the range.
    SELECT count(*)::integer, 0, coalesce(bool_or(r.ordinal = owned[1] AND r.item_id::text = p_ids[1]), false)
                                 AND coalesce(bool_and(owned[r.ordinal - owned[1] + 1] = r.ordinal), false)
    INTO done_completed, done_failed, ids_match FROM recorded r;
    IF done_completed <> p_whole OR NOT ids_match THEN
      RAISE EXCEPTION 'not every id of the report was recordable' USING ERRCODE = 'OPS01';
    END IF;
    DELETE FROM "assistant_operation_lease" WHERE operation_id = p_operation AND owner = p_owner;
    RETURN;
  END IF;
  IF p_reasons IS NULL AND cardinality(p_ids) = owned_count AND owned_count = cardinality(owned) THEN
    -- Two statements, not one: only a range written as such is an index range in a generic plan.
    -- The range when the ordinals span as many as they are: every lease writes its ordinals in
    -- order, and an extended lease (appended) fails the count test above, so they are the range.
    -- The rows recorded must still be exactly the lease's, in order, or nothing is recorded.
    IF owned[owned_count] - owned[1] + 1 = owned_count THEN
      WITH recorded AS (
        UPDATE "assistant_operation_item" AS i
        SET status = 'completed', attempts = i.attempts + 1, reason = NULL, updated_at = now()
        WHERE i.operation_id = p_operation AND i.ordinal >= owned[1] AND i.ordinal <= owned[owned_count]
          AND i.status = 'pending'
        RETURNING i.ordinal, i.item_id)
      SELECT array_agg(r.ordinal ORDER BY r.ordinal) IS NOT DISTINCT FROM owned
             AND array_agg(r.item_id::text ORDER BY r.item_id::text COLLATE "C")
                 IS NOT DISTINCT FROM (SELECT array_agg(x ORDER BY x COLLATE "C") FROM unnest(p_ids) AS x),
             count(*)::integer, 0
      INTO ids_match, done_completed, done_failed FROM recorded r;
    ELSE
      WITH recorded AS (
        UPDATE "assistant_operation_item" AS i
        SET status = 'completed', attempts = i.attempts + 1, reason = NULL, updated_at = now()
        WHERE i.operation_id = p_operation AND i.ordinal = ANY(owned) AND i.status = 'pending'
        RETURNING i.item_id)
      SELECT array_agg(r.item_id::text ORDER BY r.item_id::text COLLATE "C")
               IS NOT DISTINCT FROM (SELECT array_agg(x ORDER BY x COLLATE "C") FROM unnest(p_ids) AS x),
             count(*)::integer, 0
      INTO ids_match, done_completed, done_failed FROM recorded r;
    END IF;
    IF done_completed <> owned_count OR NOT ids_match THEN
      RAISE EXCEPTION 'not every id of the report was recordable' USING ERRCODE = 'OPS01';
    END IF;
    DELETE FROM "assistant_operation_lease" WHERE operation_id = p_operation AND owner = p_owner;
    RETURN;
  END IF;
  IF p_reasons IS NULL THEN
    -- Completions only: no indexed column changes, so the update is HOT.
    WITH recorded AS (
      UPDATE "assistant_operation_item" AS i
      SET status = 'completed', attempts = i.attempts + 1, reason = NULL, updated_at = now()
      WHERE i.operation_id = p_operation AND i.item_id = ANY(p_ids) AND i.status = 'pending'
      RETURNING i.ordinal)
    SELECT array_agg(r.ordinal), count(*)::integer, 0 INTO recorded_ordinals, done_completed, done_failed
    FROM recorded r;
  ELSE
    WITH recorded AS (
      UPDATE "assistant_operation_item" AS i
      SET status = CASE WHEN f.reason IS NULL THEN 'completed' ELSE 'failed' END,
          reason = f.reason, attempts = i.attempts + 1, updated_at = now()
      FROM unnest(p_ids, p_reasons) AS f(item_id, reason)
      WHERE i.operation_id = p_operation AND i.item_id = ANY(p_ids) AND i.item_id = f.item_id
        AND i.status = 'pending'
      RETURNING i.ordinal, i.status)
    SELECT array_agg(r.ordinal), count(*) FILTER (WHERE r.status = 'completed')::integer,
           count(*) FILTER (WHERE r.status = 'failed')::integer
    INTO recorded_ordinals, done_completed, done_failed FROM recorded r;
  END IF;
  IF done_completed + done_failed < cardinality(p_ids)
     OR EXISTS (SELECT 1 FROM unnest(recorded_ordinals) AS r(o) WHERE r.o NOT IN (SELECT unnest(owned))) THEN
    RAISE EXCEPTION 'not every id of the report was recordable' USING ERRCODE = 'OPS01';
  END IF;
  UPDATE "assistant_operation_lease" SET remaining = remaining - (done_completed + done_failed)
  WHERE operation_id = p_operation AND owner = p_owner;
END
$function$;--> statement-breakpoint
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
$function$;--> statement-breakpoint
CREATE OR REPLACE FUNCTION opspad_record_lease_steps(p_operation uuid, p_organization uuid, p_conversation uuid, p_owners text[], p_sizes integer[], p_ids text[], p_reasons text[], p_lease_seconds double precision, p_limits integer[], p_epoch integer, p_wholes integer[] DEFAULT NULL::integer[])
 RETURNS TABLE(lane_owner text, id uuid, conversation_id uuid, organization_id uuid, operation_type character varying, status character varying, total_items integer, completed_count integer, failed_count integer, state_json jsonb, created_at timestamp with time zone, updated_at timestamp with time zone, in_flight integer, item_ids text[], lease text)
 LANGUAGE plpgsql
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
#variable_conflict use_column
DECLARE
  op "assistant_operation"%ROWTYPE;
  lanes integer := coalesce(cardinality(p_owners), 0);
  first_id integer := 1;
  lane_reasons text[];
  lane_completed integer;
  lane_failed integer;
  done_completed integer := 0;
  done_failed integer := 0;
  recorded_json jsonb[] := ARRAY[]::jsonb[];
  taken_ordinals integer[];
  taken_ids text[];
  scan_from integer;
  pending_now integer;
  new_cursor integer;
  lease_states text[] := ARRAY[]::text[];
  batch_starts integer[] := ARRAY[]::integer[];
  batch_sizes integer[] := ARRAY[]::integer[];
  all_taken text[] := ARRAY[]::text[];
  leased_owners text[] := ARRAY[]::text[];
  leased_json jsonb[] := ARRAY[]::jsonb[];
  owned record;
  taken record;
BEGIN
  SELECT * INTO op FROM "assistant_operation" o
  WHERE o.id = p_operation AND o.organization_id = p_organization AND o.conversation_id = p_conversation
  FOR KEY SHARE;
  IF NOT FOUND OR lanes = 0 OR NOT opspad_record_usual(op.status, op.state_json, p_ids)
     OR coalesce(cardinality(p_sizes), 0) <> lanes
     OR (SELECT sum(s) FROM unnest(p_sizes) AS s) IS DISTINCT FROM cardinality(p_ids)::bigint
     OR (p_reasons IS NOT NULL AND cardinality(p_reasons) <> cardinality(p_ids))
     OR EXISTS (SELECT 1 FROM unnest(p_sizes) AS s WHERE s IS NULL OR s < 1)
     OR (SELECT count(DISTINCT w) FROM unnest(p_owners) AS w) <> lanes THEN
    RETURN;
  END IF;
  FOR g IN 1..lanes LOOP
    lane_reasons := CASE WHEN p_reasons IS NULL THEN NULL ELSE p_reasons[first_id:first_id + p_sizes[g] - 1] END;
    IF lane_reasons IS NOT NULL AND NOT EXISTS (SELECT 1 FROM unnest(lane_reasons) AS r WHERE r IS NOT NULL) THEN
      lane_reasons := NULL;
    END IF;
    owned := opspad_record_owned(p_operation, p_owners[g], p_ids[first_id:first_id + p_sizes[g] - 1], lane_reasons,
                                 p_wholes[g]);
    lane_completed := owned.done_completed;
    lane_failed := owned.done_failed;
    done_completed := done_completed + lane_completed;
    done_failed := done_failed + lane_failed;
    recorded_json := recorded_json || jsonb_build_object('completed', lane_completed, 'failed', lane_failed,
      'already_recorded', 0, 'lease_conflicts', 0);
    first_id := first_id + p_sizes[g];
  END LOOP;

  -- From here the call holds the row's update lock, as opspad_record_lease_step does from the
  -- same point and for the same reasons (leases take turns; spent lease rows; a fresh status).
  SELECT o.status, o.state_json INTO op.status, op.state_json FROM "assistant_operation" o
  WHERE o.id = p_operation FOR NO KEY UPDATE;
  INSERT INTO "operation_event" (operation_id, organization_id, kind, actor, data)
  SELECT p_operation, p_organization, 'batch_recorded', p_owners[g], recorded_json[g]
  FROM generate_series(1, lanes) AS g;
  DELETE FROM "assistant_operation_lease" WHERE operation_id = p_operation AND remaining <= 0;
  scan_from := (op.state_json->>'cursor')::integer;
  FOR g IN 1..lanes LOOP
    taken_ordinals := NULL;
    taken_ids := NULL;
    lease_states := lease_states || 'declined'::text;
    IF (opspad_lease_usual(p_operation, p_owners[g], op.status, op.state_json, p_epoch)).usual THEN
      taken := opspad_lease_from_cursor(p_operation, p_owners[g], p_lease_seconds, scan_from,
                                        coalesce(p_limits[g], (op.state_json->>'batch_size')::integer));
      taken_ordinals := taken.taken_ordinals;
      taken_ids := taken.taken_ids;
      IF taken_ordinals IS NOT NULL THEN
        lease_states[g] := 'leased';
        scan_from := taken_ordinals[cardinality(taken_ordinals)] + 1;
        new_cursor := greatest(new_cursor, scan_from);
        leased_owners := leased_owners || p_owners[g];
        leased_json := leased_json || jsonb_build_object(
          'count', cardinality(taken_ordinals), 'first_ordinal', taken_ordinals[1],
          'last_ordinal', taken_ordinals[cardinality(taken_ordinals)]);
      ELSE
        -- Nothing from the cursor: "no batch" only when no item is pending at all, with this
        -- call's own records added to the row's counters.
        SELECT p.pending INTO pending_now
        FROM opspad_pending_items(p_operation, op.total_items,
                                  op.completed_count + done_completed + op.failed_count + done_failed, op.state_json) p;
        IF pending_now <= 0 THEN
          lease_states[g] := 'none';
          new_cursor := greatest(new_cursor, op.total_items);
        END IF;
      END IF;
    END IF;
    batch_starts := batch_starts || (cardinality(all_taken) + 1);
    batch_sizes := batch_sizes || coalesce(cardinality(taken_ids), 0);
    all_taken := all_taken || coalesce(taken_ids, ARRAY[]::text[]);
  END LOOP;

  -- Last, in one statement: the leases' events (in the lanes' order) and the operation row (the
  -- counters commute and the cursor only moves forward).
  RETURN QUERY
  WITH leased AS (
    INSERT INTO "operation_event" (operation_id, organization_id, kind, actor, data)
    SELECT p_operation, p_organization, 'batch_leased', e.owner, e.data
    FROM unnest(leased_owners, leased_json) WITH ORDINALITY AS e(owner, data, n) ORDER BY e.n),
  moved AS (
    UPDATE "assistant_operation" o
    SET completed_count = o.completed_count + done_completed, failed_count = o.failed_count + done_failed,
        state_json = opspad_cursor_forward(o.state_json, new_cursor),
        updated_at = now()
    WHERE o.id = p_operation
    RETURNING o.*),
  flight AS (
    SELECT coalesce(sum(l.remaining), 0)::integer AS n FROM "assistant_operation_lease" l
    WHERE l.operation_id = p_operation AND l.remaining > 0)
  SELECT p_owners[g], m.id, m.conversation_id, m.organization_id, m.operation_type, m.status, m.total_items,
         m.completed_count, m.failed_count, m.state_json, m.created_at, m.updated_at, f.n,
         coalesce(all_taken[batch_starts[g]:batch_starts[g] + batch_sizes[g] - 1], ARRAY[]::text[]), lease_states[g]
  FROM moved m, flight f, generate_series(1, lanes) AS g
  ORDER BY g;
END
$function$;
