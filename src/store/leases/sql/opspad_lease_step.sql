-- A lease in one round trip: the usual case of the general lease transaction
-- (operation-lease.ts), the same statements in the same lock order, run where the data is.
-- Goes ahead only when the lease is the usual case (opspad_lease_usual: active, in the caller's
-- dispatch epoch, no lease row of the caller's, no expired lease) and a pending item is found
-- from the cursor; otherwise returns no row, having changed nothing, and the caller runs the
-- general transaction. p_limit null: the operation's batch size.
-- Lock order: the operation row's update lock, held to the commit (leases of one operation take
-- turns: opspad_lease_from_cursor) → the owner's lease row → the event and the operation row's
-- update, last.
-- Statements are planned once per connection (plan_cache_mode): their generic plans are the
-- custom ones (lookups by the operation's key and ordinals or ids).
CREATE OR REPLACE FUNCTION opspad_lease_step(p_operation uuid, p_organization uuid, p_conversation uuid, p_owner text, p_lease_seconds double precision, p_limit integer, p_epoch integer)
 RETURNS TABLE(id uuid, conversation_id uuid, organization_id uuid, operation_type character varying, status character varying, total_items integer, completed_count integer, failed_count integer, state_json jsonb, created_at timestamp with time zone, updated_at timestamp with time zone, in_flight integer, item_ids text[])
 LANGUAGE plpgsql
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
#variable_conflict use_column
DECLARE
  op "assistant_operation"%ROWTYPE;
  taken_ordinals integer[];
  taken_ids text[];
  in_flight_now integer;
  pending_now integer;
  taken record;
BEGIN
  SELECT * INTO op FROM "assistant_operation" o
  WHERE o.id = p_operation AND o.organization_id = p_organization AND o.conversation_id = p_conversation
  FOR NO KEY UPDATE;
  IF NOT FOUND OR NOT (opspad_lease_usual(p_operation, p_owner, op.status, op.state_json, p_epoch)).usual THEN
    RETURN;
  END IF;
  taken := opspad_lease_from_cursor(p_operation, p_owner, p_lease_seconds, (op.state_json->>'cursor')::integer,
                                    coalesce(p_limit, (op.state_json->>'batch_size')::integer));
  taken_ordinals := taken.taken_ordinals;
  taken_ids := taken.taken_ids;
  IF taken_ordinals IS NULL THEN
    -- Nothing from the cursor: "no batch" only when no item is pending at all.
    SELECT p.pending, p.in_flight INTO pending_now, in_flight_now
    FROM opspad_pending_items(p_operation, op.total_items, op.completed_count + op.failed_count, op.state_json) p;
    IF pending_now > 0 THEN
      RETURN;
    END IF;
    DELETE FROM "assistant_operation_lease" WHERE operation_id = p_operation AND remaining <= 0;
    RETURN QUERY
    WITH moved AS (
      UPDATE "assistant_operation" o
      SET state_json = opspad_cursor_forward(o.state_json, o.total_items), updated_at = now()
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
  DELETE FROM "assistant_operation_lease" WHERE operation_id = p_operation AND remaining <= 0;
  -- Last: the event, and the operation row (the cursor only moves forward).
  RETURN QUERY
  WITH leased AS (
    INSERT INTO "operation_event" (operation_id, organization_id, kind, actor, data)
    VALUES (p_operation, p_organization, 'batch_leased', p_owner, jsonb_build_object(
      'count', cardinality(taken_ordinals), 'first_ordinal', taken_ordinals[1],
      'last_ordinal', taken_ordinals[cardinality(taken_ordinals)]))),
  moved AS (
    UPDATE "assistant_operation" o
    SET state_json = opspad_cursor_forward(o.state_json, taken_ordinals[cardinality(taken_ordinals)] + 1),
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
$function$;
