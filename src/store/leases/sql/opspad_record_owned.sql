-- The record of a report by the owner of its items' lease, shared by the step functions: every
-- id must be a pending item of the caller's lease row, or nothing is recorded (SQLSTATE OPS01,
-- which rolls back what it had written; the general path, item-sql.ts, then decides id by id).
-- The update finds the rows through the unique (operation, item) index; whether they are the
-- caller's is checked after, against its lease row's ordinals hashed once, not per row.
-- p_reasons null: every id completed; otherwise one entry per id, null for a completion.
-- The usual report, every item of the lease completed, is recorded by the lease's ordinals (a
-- range of the primary key when they follow each other) and its ids compared after, sorted:
-- a third of the cost of looking each id up (1,000 items: 9 ms against 3-4 ms, one connection).
-- Its checks are read in the statement that records, and the spent lease row is dropped here.
-- p_whole: the report is the whole of the caller's lease, completed, named by its size and its
-- first id (p_ids holds only that): a worker checks its outcome against the batch it leased and
-- sends neither the ids nor their comparison, a quarter of a record's time at 1,000 items. The
-- lease's ordinals must be exactly an ascending range of that size whose first row is the named
-- id, so the rows are those the ids would name; anything else is refused as above.
-- Lock order: the report's item rows, then the caller's lease row.
CREATE OR REPLACE FUNCTION opspad_record_owned(p_operation uuid, p_owner text, p_ids text[], p_reasons text[], p_whole integer DEFAULT NULL::integer, OUT done_completed integer, OUT done_failed integer)
 RETURNS record
 LANGUAGE plpgsql
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
DECLARE
  owned integer[];
  owned_count integer;
  recorded_ordinals integer[];
  ids_match boolean;
BEGIN
  SELECT l.ordinals, l.remaining INTO owned, owned_count FROM "assistant_operation_lease" l
  WHERE l.operation_id = p_operation AND l.owner = p_owner;
  IF p_whole IS NOT NULL THEN
    IF p_reasons IS NOT NULL OR coalesce(cardinality(p_ids), 0) <> 1 OR owned_count IS DISTINCT FROM p_whole
       OR cardinality(owned) <> p_whole OR owned[p_whole] - owned[1] + 1 <> p_whole THEN
      RAISE EXCEPTION 'not every id of the report was recordable' USING ERRCODE = 'OPS01';
    END IF;
    WITH recorded AS (
      UPDATE "assistant_operation_item" AS i
      SET status = 'completed', attempts = i.attempts + 1, reason = NULL, updated_at = now()
      WHERE i.operation_id = p_operation AND i.ordinal >= owned[1] AND i.ordinal <= owned[p_whole]
        AND i.status = 'pending'
      RETURNING i.ordinal, i.item_id)
    -- Every row recorded is the lease's ordinal at its place: with the count, the lease is the range.
    SELECT count(*)::integer, 0, coalesce(bool_or(r.ordinal = owned[1] AND r.item_id::text = p_ids[1]), false)
                                 AND coalesce(bool_and(owned[r.ordinal - owned[1] + 1] = r.ordinal), false)
    INTO done_completed, done_failed, ids_match FROM recorded r;
    IF done_completed <> p_whole OR NOT ids_match THEN
      RAISE EXCEPTION 'not every id of the report was recordable' USING ERRCODE = 'OPS01';
    END IF;
    DELETE FROM "assistant_operation_lease" WHERE operation_id = p_operation AND owner = p_owner;
    RETURN;
  END IF;
  IF p_reasons IS NULL AND cardinality(p_ids) = owned_count AND owned_count = cardinality(owned) THEN
    -- Two statements, not one: only a range written as such is an index range in a generic plan.
    -- The range when the ordinals span as many as they are: every lease writes its ordinals in
    -- order, and an extended lease (appended) fails the count test above, so they are the range.
    -- The rows recorded must still be exactly the lease's, in order, or nothing is recorded.
    IF owned[owned_count] - owned[1] + 1 = owned_count THEN
      WITH recorded AS (
        UPDATE "assistant_operation_item" AS i
        SET status = 'completed', attempts = i.attempts + 1, reason = NULL, updated_at = now()
        WHERE i.operation_id = p_operation AND i.ordinal >= owned[1] AND i.ordinal <= owned[owned_count]
          AND i.status = 'pending'
        RETURNING i.ordinal, i.item_id)
      SELECT array_agg(r.ordinal ORDER BY r.ordinal) IS NOT DISTINCT FROM owned
             AND array_agg(r.item_id::text ORDER BY r.item_id::text COLLATE "C")
                 IS NOT DISTINCT FROM (SELECT array_agg(x ORDER BY x COLLATE "C") FROM unnest(p_ids) AS x),
             count(*)::integer, 0
      INTO ids_match, done_completed, done_failed FROM recorded r;
    ELSE
      WITH recorded AS (
        UPDATE "assistant_operation_item" AS i
        SET status = 'completed', attempts = i.attempts + 1, reason = NULL, updated_at = now()
        WHERE i.operation_id = p_operation AND i.ordinal = ANY(owned) AND i.status = 'pending'
        RETURNING i.item_id)
      SELECT array_agg(r.item_id::text ORDER BY r.item_id::text COLLATE "C")
               IS NOT DISTINCT FROM (SELECT array_agg(x ORDER BY x COLLATE "C") FROM unnest(p_ids) AS x),
             count(*)::integer, 0
      INTO ids_match, done_completed, done_failed FROM recorded r;
    END IF;
    IF done_completed <> owned_count OR NOT ids_match THEN
      RAISE EXCEPTION 'not every id of the report was recordable' USING ERRCODE = 'OPS01';
    END IF;
    DELETE FROM "assistant_operation_lease" WHERE operation_id = p_operation AND owner = p_owner;
    RETURN;
  END IF;
  IF p_reasons IS NULL THEN
    -- Completions only: no indexed column changes, so the update is HOT.
    WITH recorded AS (
      UPDATE "assistant_operation_item" AS i
      SET status = 'completed', attempts = i.attempts + 1, reason = NULL, updated_at = now()
      WHERE i.operation_id = p_operation AND i.item_id = ANY(p_ids) AND i.status = 'pending'
      RETURNING i.ordinal)
    SELECT array_agg(r.ordinal), count(*)::integer, 0 INTO recorded_ordinals, done_completed, done_failed
    FROM recorded r;
  ELSE
    WITH recorded AS (
      UPDATE "assistant_operation_item" AS i
      SET status = CASE WHEN f.reason IS NULL THEN 'completed' ELSE 'failed' END,
          reason = f.reason, attempts = i.attempts + 1, updated_at = now()
      FROM unnest(p_ids, p_reasons) AS f(item_id, reason)
      WHERE i.operation_id = p_operation AND i.item_id = ANY(p_ids) AND i.item_id = f.item_id
        AND i.status = 'pending'
      RETURNING i.ordinal, i.status)
    SELECT array_agg(r.ordinal), count(*) FILTER (WHERE r.status = 'completed')::integer,
           count(*) FILTER (WHERE r.status = 'failed')::integer
    INTO recorded_ordinals, done_completed, done_failed FROM recorded r;
  END IF;
  IF done_completed + done_failed < cardinality(p_ids)
     OR EXISTS (SELECT 1 FROM unnest(recorded_ordinals) AS r(o) WHERE r.o NOT IN (SELECT unnest(owned))) THEN
    RAISE EXCEPTION 'not every id of the report was recordable' USING ERRCODE = 'OPS01';
  END IF;
  UPDATE "assistant_operation_lease" SET remaining = remaining - (done_completed + done_failed)
  WHERE operation_id = p_operation AND owner = p_owner;
END
$function$;
