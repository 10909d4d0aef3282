-- A create in one call (src/store/operations/operation-create.ts): the conversation's lock, the
-- organization's quota, the pause of the conversation's active operation, the background limit,
-- then the operation row (held for approval when its organization's policy says so), its
-- `created` event and its items (p_ids; null when the caller wrote them first, by COPY). A
-- refusal raises (OPS02, OPS03) and the statement writes nothing. One round trip, where a
-- transaction of these steps is nine, each a socket write and read in the API and in Postgres.
-- Lock order: the conversation → the quota row → the active operation's row → the
-- organization's capacity lock (background only) → the new rows, which nobody else can see
-- before commit. Each step is a statement of its own, so each sees what committed while it
-- waited for the lock before it.
CREATE OR REPLACE FUNCTION opspad_create_operation(p_conversation uuid, p_organization uuid, p_id uuid, p_type character varying, p_total integer, p_state jsonb, p_ids text[], p_background boolean, p_pause_reason text, p_actor text, p_event jsonb, p_max_stored bigint, p_max_open bigint, p_max_background bigint)
 RETURNS TABLE(id uuid, conversation_id uuid, organization_id uuid, operation_type character varying, status character varying, total_items integer, completed_count integer, failed_count integer, state_json jsonb, created_at timestamp with time zone, updated_at timestamp with time zone, paused_operation_id uuid)
 LANGUAGE plpgsql
AS $function$
#variable_conflict use_column
DECLARE
  paused uuid;
BEGIN
  PERFORM opspad_lock_conversation(p_conversation, p_organization);
  PERFORM opspad_reserve_quota(p_organization, p_total, p_max_stored, p_max_open);
  paused := opspad_pause_active(p_organization, p_conversation, NULL, p_pause_reason, p_actor);
  IF p_background THEN
    PERFORM opspad_assert_background_capacity(p_organization, p_max_background);
  END IF;
  RETURN QUERY
  WITH created AS (
    INSERT INTO assistant_operation AS o
      (id, conversation_id, organization_id, operation_type, status, total_items, state_json)
    VALUES (p_id, p_conversation, p_organization, p_type,
            CASE WHEN p_background AND opspad_needs_approval(p_organization, p_total)
                 THEN 'awaiting_approval' ELSE 'active' END,
            p_total, p_state)
    RETURNING o.*),
  created_event AS (
    INSERT INTO operation_event (operation_id, organization_id, kind, actor, data)
    SELECT c.id, p_organization, 'created', p_actor, p_event FROM created c),
  items AS (
    INSERT INTO assistant_operation_item (operation_id, ordinal, item_id)
    SELECT c.id, (u.o - 1)::integer, u.v FROM created c, unnest(p_ids) WITH ORDINALITY AS u(v, o))
  SELECT c.id, c.conversation_id, c.organization_id, c.operation_type, c.status, c.total_items,
         c.completed_count, c.failed_count, c.state_json, c.created_at, c.updated_at, paused
  FROM created c;
END
$function$;
