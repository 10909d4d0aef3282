-- Several lanes' opspad_record_lease_step in one call, one operation row update and one commit:
-- what a worker process sends when its lanes of one operation finish batches while a call of
-- theirs is in flight (step-groups.ts). Lane g owns p_owners[g] and reported the next
-- p_sizes[g] ids of p_ids (with their p_reasons, or null: all completed); it leases at most
-- p_limits[g] items (null: the operation's batch size); p_wholes[g] (p_wholes null: none): its
-- report is its whole lease, that many items named by its one id (opspad_record_owned's p_whole).
-- Each lane is recorded and leased exactly as opspad_record_lease_step does it; a lane's scan
-- starts after the batch the lane before it took. Declines (no row, nothing changed) when opspad_record_step would; an id a lane may not
-- record rolls back the whole call (OPS01): the caller then sends each lane alone.
-- One row per lane, in p_owners' order, each with the operation as updated.
-- Lock order: the operation row (FOR KEY SHARE) → each lane's report's item rows and lease row
-- → the operation row's update lock, held to the commit → the records' events and the spent lease
-- rows → each lane's next lease row → the leases' events and the operation row's update, last.
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
