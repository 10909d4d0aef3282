-- An organization's open operations (active, paused or awaiting approval; a test holds the list
-- to the domain's), counted up to p_limit: the range of the partial index
-- idx_assistant_operation_org_open read is at most that many entries, whatever the organization
-- has finished.
CREATE OR REPLACE FUNCTION opspad_count_open_operations(p_organization uuid, p_limit bigint)
 RETURNS integer
 LANGUAGE plpgsql
 STABLE
AS $function$
BEGIN
  RETURN (SELECT count(*)::integer FROM (
    SELECT 1 FROM assistant_operation o
    WHERE o.organization_id = p_organization AND o.status IN ('active', 'paused', 'awaiting_approval')
    LIMIT p_limit) open);
END
$function$;
