-- A progress call that finds nothing to lease, in the same one round trip.
--
-- opspad_lease_step (0008) declined whenever it found no pending item from the cursor, and the
-- caller then ran the shared transaction (five round trips, to find nothing again) and the
-- exclusive one (six more) to answer "no batch". That is the last progress call of every
-- operation an assistant drives: one request in seven of the seed's loop, and the slowest. The
-- call now answers it itself when no item is pending at all — counted from the operation's
-- counters and its lease rows, the same count the exclusive mode trusts — and still declines
-- when items are pending but not found from the cursor (behind it, or locked by a lease being
-- taken), which only the exclusive mode, alone on the operation, can tell.
CREATE OR REPLACE FUNCTION "opspad_lease_step"(
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
  in_flight_now integer;
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
    -- Nothing from the cursor. The answer is exactly "no batch" when no item is pending at all:
    -- counted as the exclusive mode counts it (items not finished nor abandoned, less those in
    -- flight). While this call holds the operation row, nothing can return items to pending
    -- (that takes the row exclusively); a lease being taken keeps its items pending until it
    -- commits, and a record committing after the row was read leaves its counts stale but its
    -- lease rows fresh: either way the count comes out larger, never smaller, and the call declines.
    SELECT coalesce(sum(l.remaining), 0)::integer INTO in_flight_now
    FROM "assistant_operation_lease" l WHERE l.operation_id = p_operation AND l.remaining > 0;
    IF op.total_items - op.completed_count - op.failed_count
       - coalesce((op.state_json->>'abandoned_count')::integer, 0) - in_flight_now > 0 THEN
      RETURN;
    END IF;
    DELETE FROM "assistant_operation_lease" WHERE operation_id = p_operation AND remaining <= 0;
    -- The cursor goes to the end, as the exclusive mode puts it, so later scans are empty.
    RETURN QUERY
    WITH moved AS (
      UPDATE "assistant_operation" o
      SET state_json = jsonb_set(o.state_json, '{cursor}', to_jsonb(o.total_items)), updated_at = now()
      WHERE o.id = p_operation AND (o.state_json->>'cursor')::integer < o.total_items
      RETURNING o.*),
    found AS (
      SELECT * FROM moved
      UNION ALL
      SELECT o.* FROM "assistant_operation" o WHERE o.id = p_operation AND NOT EXISTS (SELECT 1 FROM moved))
    SELECT c.id, c.conversation_id, c.organization_id, c.operation_type, c.status, c.total_items,
           c.completed_count, c.failed_count, c.state_json, c.created_at, c.updated_at,
           in_flight_now, ARRAY[]::text[]
    FROM found c;
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
