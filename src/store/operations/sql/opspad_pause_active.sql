-- Pauses the conversation's active operation other than p_except, if there is one, with its
-- `paused` event, and returns its id (src/store/operations/operation-admission.ts pauseActive):
-- a new active operation, a resume or an approval takes its place. `paused_by` is the domain's
-- NEWER_OPERATION (a test holds them together).
CREATE OR REPLACE FUNCTION opspad_pause_active(p_organization uuid, p_conversation uuid, p_except uuid, p_reason text, p_actor text)
 RETURNS uuid
 LANGUAGE plpgsql
AS $function$
DECLARE
  paused uuid;
BEGIN
  UPDATE assistant_operation o
  SET status = 'paused', updated_at = now(),
      state_json = o.state_json || jsonb_build_object('paused_reason', p_reason, 'paused_by', 'newer_operation')
  WHERE o.organization_id = p_organization AND o.conversation_id = p_conversation AND o.status = 'active'
    AND o.id IS DISTINCT FROM p_except
  RETURNING o.id INTO paused;
  IF paused IS NOT NULL THEN
    INSERT INTO operation_event (operation_id, organization_id, kind, actor, data)
    VALUES (paused, p_organization, 'paused', p_actor, jsonb_build_object('reason', p_reason));
  END IF;
  RETURN paused;
END
$function$;
