-- The general lease statement (item-sql.ts LEASE_NEXT_SQL, and the step functions' lease when
-- a live lease reaches past the cursor: opspad_lease_from_cursor): up to p_limit pending items
-- from p_from that no live lease holds, leased to p_owner, its lease row written (or extended).
-- p_shared: the caller holds the operation row's update lock, not alone on it; the scan starts at
-- the cursor as it is now (it only moves forward then) and a second look runs (below), a guard
-- kept from when leases ran side by side. Holding the row exclusively, the scan starts at p_from.
-- Lock order: the candidates' item rows (SKIP LOCKED), then the owner's lease row.
-- Cost: the batch's rows by primary key from the cursor, and the operation's live lease rows
-- (one per lane) hashed once per pass; a pass more only when a lease committed under the scan.
CREATE OR REPLACE FUNCTION opspad_lease_items(p_operation uuid, p_owner text, p_lease_seconds double precision, p_from integer, p_limit integer, p_shared boolean)
 RETURNS TABLE(leased_ordinal integer, leased_item_id text)
 LANGUAGE plpgsql
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
DECLARE
  scan_from integer := p_from;
  wanted integer;
  found_ordinals integer[];
  found_ids text[];
  kept_ordinals integer[];
  kept_ids text[];
  taken_ordinals integer[] := ARRAY[]::integer[];
  taken_ids text[] := ARRAY[]::text[];
BEGIN
  IF p_shared THEN
    SELECT greatest(p_from, (o.state_json->>'cursor')::integer) INTO scan_from
    FROM "assistant_operation" o WHERE o.id = p_operation;
  END IF;
  -- At most four passes: each one more only when a lease committed under the previous one.
  FOR pass IN 1..4 LOOP
    wanted := p_limit - cardinality(taken_ordinals);
    SELECT coalesce(array_agg(s.ordinal ORDER BY s.ordinal), ARRAY[]::integer[]),
           coalesce(array_agg(s.item_id ORDER BY s.ordinal), ARRAY[]::text[])
    INTO found_ordinals, found_ids
    FROM (SELECT i.ordinal, i.item_id::text AS item_id FROM "assistant_operation_item" i
          WHERE i.operation_id = p_operation AND i.status = 'pending' AND i.ordinal >= scan_from
            AND i.ordinal NOT IN (SELECT unnest(l.ordinals) FROM "assistant_operation_lease" l
                                  WHERE l.operation_id = p_operation AND l.remaining > 0)
          ORDER BY i.ordinal LIMIT wanted
          FOR UPDATE OF i SKIP LOCKED) s;
    IF p_shared AND cardinality(found_ordinals) > 0 THEN
      -- The second look, on a snapshot taken with the locks held.
      SELECT coalesce(array_agg(f.o ORDER BY f.o), ARRAY[]::integer[]),
             coalesce(array_agg(f.v ORDER BY f.o), ARRAY[]::text[])
      INTO kept_ordinals, kept_ids
      FROM unnest(found_ordinals, found_ids) AS f(o, v)
      WHERE f.o NOT IN (SELECT unnest(l.ordinals) FROM "assistant_operation_lease" l
                        WHERE l.operation_id = p_operation AND l.remaining > 0);
    ELSE
      kept_ordinals := found_ordinals;
      kept_ids := found_ids;
    END IF;
    taken_ordinals := taken_ordinals || kept_ordinals;
    taken_ids := taken_ids || kept_ids;
    EXIT WHEN cardinality(found_ordinals) < wanted OR cardinality(kept_ordinals) = cardinality(found_ordinals);
    scan_from := found_ordinals[cardinality(found_ordinals)] + 1;
  END LOOP;
  IF cardinality(taken_ordinals) = 0 THEN
    RETURN;
  END IF;
  PERFORM opspad_write_lease(p_operation, p_owner, taken_ordinals, p_lease_seconds);
  RETURN QUERY SELECT t.o, t.v FROM unnest(taken_ordinals, taken_ids) AS t(o, v);
END
$function$;
