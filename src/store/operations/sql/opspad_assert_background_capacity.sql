-- Refuses a new active background operation when the organization already has p_limit of them
-- (OPSPAD_MAX_ACTIVE_BACKGROUND; null: no limit): raises OPS03 with the figures as JSON in
-- DETAIL. An advisory lock per organization, the class XACT_LOCK_CLASS.backgroundAdmission of
-- src/store/db/lock-keys.ts (a test holds them together), serializes the check, so concurrent
-- creates, resumes and approvals cannot all pass it.
CREATE OR REPLACE FUNCTION opspad_assert_background_capacity(p_organization uuid, p_limit bigint)
 RETURNS void
 LANGUAGE plpgsql
AS $function$
DECLARE
  active integer;
BEGIN
  IF p_limit IS NULL THEN
    RETURN;
  END IF;
  PERFORM pg_advisory_xact_lock(73031, hashtext(p_organization::text));
  SELECT count(*)::integer INTO active FROM assistant_operation o
  WHERE o.organization_id = p_organization AND o.status = 'active' AND o.state_json->>'execution' = 'background';
  IF active >= p_limit THEN
    RAISE EXCEPTION USING ERRCODE = 'OPS03', MESSAGE = 'too many active background operations',
      DETAIL = jsonb_build_object('active', active, 'limit', p_limit)::text;
  END IF;
END
$function$;
