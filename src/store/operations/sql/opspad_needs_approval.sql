-- The approval rule: whether a background operation of p_total items of the organization must
-- wait for a person's approval (its approve_above). A create decides its status with it; the
-- approval module applies it to a row already written (operation-approval.ts).
-- PL/pgSQL, not SQL: a SQL function with a subquery is not inlined, and one called from a
-- statement plans its body again on every execution of that statement (40 µs a create).
CREATE OR REPLACE FUNCTION opspad_needs_approval(p_organization uuid, p_total integer)
 RETURNS boolean
 LANGUAGE plpgsql
 STABLE
AS $function$
BEGIN
  RETURN EXISTS (SELECT 1 FROM organization g WHERE g.id = p_organization
    AND g.approve_above IS NOT NULL AND p_total > g.approve_above);
END
$function$;
