-- An operation's state_json with its cursor moved to p_cursor, never back (p_cursor null: as it
-- is): the calls of an operation's lanes may apply it in any order. The step functions and the general
-- lease's tail (operation-tail.ts) move the cursor forward only through it; only a lease alone
-- on the operation (exclusive mode) sets it back. Inlined where it is called.
CREATE OR REPLACE FUNCTION opspad_cursor_forward(p_state jsonb, p_cursor integer)
 RETURNS jsonb
 LANGUAGE sql
 IMMUTABLE
AS $function$
  SELECT CASE WHEN p_cursor IS NULL OR (p_state->>'cursor')::integer >= p_cursor THEN p_state
              ELSE jsonb_set(p_state, '{cursor}', p_cursor::text::jsonb) END
$function$;
