-- Whether a record is the usual case the step functions serve (opspad_record_step,
-- opspad_record_lease_step): a report with ids, on an operation the lifecycle lets record (a
-- test holds the literals to its record rule), and no circuit breaker — the breaker's window is
-- read and written under an advisory lock by the general path (operation-record.ts, the rule in
-- domain/circuit-breaker.ts), which decides every other case.
CREATE OR REPLACE FUNCTION opspad_record_usual(p_status character varying, p_state jsonb, p_ids text[])
 RETURNS boolean
 LANGUAGE sql
 IMMUTABLE
AS $function$
  SELECT coalesce(cardinality(p_ids), 0) > 0 AND p_status IN ('active', 'paused')
     AND coalesce((p_state->>'max_failure_rate')::double precision, 0) <= 0
$function$;
