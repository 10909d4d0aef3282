-- Whether a lease is the usual case, the one rule the step functions and the general lease
-- transaction (operation-row.ts lockOperationForLease) both read: the operation is active (the
-- lifecycle's lease rule; a test holds the literal to it), the caller is in its dispatch epoch
-- (p_epoch null: any), holds no lease row of its own (else it renews) and no expired lease still
-- holds items (else they are reclaimed first, and the cursor may move back). The parts come
-- back too: the general path renews on owns_lease and reclaims on expired_leases.
-- Cost: the operation's lease rows (one per lane) by primary key.
CREATE OR REPLACE FUNCTION opspad_lease_usual(p_operation uuid, p_owner text, p_status character varying, p_state jsonb, p_epoch integer, OUT usual boolean, OUT epoch_matches boolean, OUT owns_lease boolean, OUT expired_leases boolean)
 RETURNS record
 LANGUAGE plpgsql
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
BEGIN
  epoch_matches := p_epoch IS NULL OR p_state->'dispatch_epoch' IS NOT DISTINCT FROM to_jsonb(p_epoch);
  SELECT coalesce(bool_or(l.owner = p_owner), false), coalesce(bool_or(l.remaining > 0 AND l.expires_at < now()), false)
  INTO owns_lease, expired_leases
  FROM "assistant_operation_lease" l WHERE l.operation_id = p_operation;
  usual := p_status = 'active' AND epoch_matches AND NOT owns_lease AND NOT expired_leases;
END
$function$;
