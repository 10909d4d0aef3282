-- An item row is written once per lease cycle: a lease no longer updates its items.
--
-- A lease used to set each item's status to 'leased' (with its owner and expiry) and the record
-- then set it to 'completed': two new versions of every row per cycle, and both had to fit in
-- the row's page for the updates to stay HOT, hence fillfactor 25 (0009): a million items took
-- 326 MB of heap, and on a machine whose page cache grows into memory it has not touched, a
-- create of a million ids over HTTP took 3.2 s at fillfactor 25 against 1.9 s at 50 and 1.85 s
-- at 100 (ten creates in a row each; COPY writes every page of the table's heap).
--
-- Now the lease lives only in assistant_operation_lease (its row already named the batch's
-- ordinals) and the item stays 'pending' while leased: an item is leased exactly when it is
-- pending and its ordinal is in a lease row with items remaining. What a lease row no longer
-- gets from the item rows' status, it gets from row locks and a second look:
--   * opspad_lease_items locks the candidates it found FOR UPDATE SKIP LOCKED, as before, and
--     leaves out those in a live lease row (on the statement's snapshot);
--   * a lease committed between that snapshot and the lock (its rows unlocked at commit, still
--     pending) is seen by a second statement, which in READ COMMITTED takes a new snapshot after
--     the locks are held: its ordinals are dropped and the scan goes on after them.
-- `attempts` now counts the leases that ended (recorded, released, expired), so the record adds
-- one; a live lease is not counted until it ends.
--
-- The item row keeps one new version per cycle, which fits in its page at fillfactor 45 (a
-- pending row ~76 bytes with its line pointer, its recorded version ~88): the heap of a million
-- items is about half of what it was. New pages only: existing rows stay where they are.
--
-- Items leased when the migration runs stay leased. A lease row's ordinals now say which items
-- it holds, but before this migration they could also name items its owner had given back (and
-- another lane may have leased since): each row is rebuilt from the items still leased to its
-- owner, found through its own ordinals (primary-key probes), and a row left with none goes.
-- Then those items go back to 'pending' and their attempts down by the one their lease will add;
-- a 'leased' item no lease row names (none should be) goes back to 'pending', unleased.
UPDATE "assistant_operation_lease" AS l SET "ordinals" = coalesce(kept."ordinals", ARRAY[]::integer[]),
  "remaining" = coalesce(kept."n", 0)
FROM "assistant_operation_lease" AS l2
LEFT JOIN LATERAL (
  SELECT array_agg(DISTINCT i."ordinal") AS "ordinals", count(DISTINCT i."ordinal")::integer AS "n"
  FROM unnest(l2."ordinals") AS o("ordinal")
  JOIN "assistant_operation_item" i ON i."operation_id" = l2."operation_id" AND i."ordinal" = o."ordinal"
  WHERE i."status" = 'leased' AND i."lease_owner" = l2."owner") AS kept ON true
WHERE l."operation_id" = l2."operation_id" AND l."owner" = l2."owner";--> statement-breakpoint
DELETE FROM "assistant_operation_lease" WHERE "remaining" <= 0;--> statement-breakpoint
UPDATE "assistant_operation_item" AS i SET "status" = 'pending', "attempts" = greatest(i."attempts" - 1, 0)
FROM (SELECT l."operation_id", unnest(l."ordinals") AS "ordinal" FROM "assistant_operation_lease" l) AS held
WHERE i."operation_id" = held."operation_id" AND i."ordinal" = held."ordinal" AND i."status" = 'leased';--> statement-breakpoint
UPDATE "assistant_operation_item" SET "status" = 'pending', "lease_owner" = NULL, "lease_expires_at" = NULL
WHERE "status" = 'leased';--> statement-breakpoint
ALTER TABLE "assistant_operation_item" DROP COLUMN "lease_owner";--> statement-breakpoint
ALTER TABLE "assistant_operation_item" DROP COLUMN "lease_expires_at";--> statement-breakpoint
ALTER TABLE "assistant_operation_item" SET (fillfactor = 45);--> statement-breakpoint
-- The lease statement, shared by the step functions and the general path (item-sql.ts
-- LEASE_NEXT_SQL): up to p_limit pending items from p_from that no live lease holds, leased to
-- p_owner, its lease row written (or extended). p_shared: the caller holds the operation row
-- shared, so other leases may be taken at the same time; the scan then starts at the cursor as
-- it is now (it only moves forward while the row is held shared) and the second look above runs.
-- Holding the row exclusively, no other lease is being taken and the scan starts at p_from.
-- Lock order: the candidates' item rows (SKIP LOCKED), then the owner's lease row.
-- Cost: the batch's rows by primary key from the cursor, and the operation's live lease rows
-- (one per lane) hashed once per pass; a pass more only when a lease committed under the scan.
CREATE FUNCTION "opspad_lease_items"(
  p_operation uuid, p_owner text, p_lease_seconds double precision, p_from integer, p_limit integer,
  p_shared boolean)
RETURNS TABLE (leased_ordinal integer, leased_item_id text)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
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
  INSERT INTO "assistant_operation_lease" AS l (operation_id, owner, ordinals, remaining, expires_at)
  VALUES (p_operation, p_owner, taken_ordinals, cardinality(taken_ordinals),
          now() + make_interval(secs => p_lease_seconds))
  ON CONFLICT (operation_id, owner) DO UPDATE
  SET ordinals = l.ordinals || excluded.ordinals, remaining = l.remaining + excluded.remaining,
      expires_at = excluded.expires_at;
  RETURN QUERY SELECT t.o, t.v FROM unnest(taken_ordinals, taken_ids) AS t(o, v);
END
$$;--> statement-breakpoint
-- The record of a report by the owner of its items' lease, shared by the step functions: every
-- id must be a pending item of the caller's lease row, or nothing is recorded (SQLSTATE OPS01,
-- which rolls back what it had written; the general path, item-sql.ts, then decides id by id).
-- The update finds the rows through the unique (operation, item) index; whether they are the
-- caller's is checked after, against its lease row's ordinals hashed once, not per row.
-- p_reasons null: every id completed; otherwise one entry per id, null for a completion.
-- Lock order: the report's item rows, then the caller's lease row.
CREATE FUNCTION "opspad_record_owned"(
  p_operation uuid, p_owner text, p_ids text[], p_reasons text[],
  OUT done_completed integer, OUT done_failed integer)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
  owned integer[];
  recorded_ordinals integer[];
BEGIN
  SELECT l.ordinals INTO owned FROM "assistant_operation_lease" l
  WHERE l.operation_id = p_operation AND l.owner = p_owner;
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
$$;--> statement-breakpoint
-- The step functions of 0008, 0010 and 0011, with the lease and the record above in place of
-- their item statements; the conditions under which they go ahead or decline are unchanged,
-- except that a record goes ahead only for the caller's own leased items (a report of items
-- nobody leased, or of another owner's expired lease, takes the general path).
CREATE OR REPLACE FUNCTION "opspad_lease_step"(
  p_operation uuid, p_organization uuid, p_conversation uuid, p_owner text,
  p_lease_seconds double precision, p_limit integer, p_epoch integer)
RETURNS TABLE (
  id uuid, conversation_id uuid, organization_id uuid, operation_type varchar, status varchar,
  total_items integer, completed_count integer, failed_count integer, state_json jsonb,
  created_at timestamptz, updated_at timestamptz, in_flight integer, item_ids text[])
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
#variable_conflict use_column
DECLARE
  op "assistant_operation"%ROWTYPE;
  taken_ordinals integer[];
  taken_ids text[];
  in_flight_now integer;
BEGIN
  SELECT * INTO op FROM "assistant_operation" o
  WHERE o.id = p_operation AND o.organization_id = p_organization AND o.conversation_id = p_conversation
  FOR KEY SHARE;
  IF NOT FOUND OR op.status <> 'active'
     OR (p_epoch IS NOT NULL AND op.state_json->'dispatch_epoch' IS DISTINCT FROM to_jsonb(p_epoch)) THEN
    RETURN;
  END IF;
  IF EXISTS (SELECT 1 FROM "assistant_operation_lease" l
             WHERE l.operation_id = p_operation
               AND (l.owner = p_owner OR (l.remaining > 0 AND l.expires_at < now()))) THEN
    RETURN;
  END IF;
  SELECT array_agg(t.leased_ordinal ORDER BY t.leased_ordinal), array_agg(t.leased_item_id ORDER BY t.leased_ordinal)
  INTO taken_ordinals, taken_ids
  FROM opspad_lease_items(p_operation, p_owner, p_lease_seconds, (op.state_json->>'cursor')::integer,
                          coalesce(p_limit, (op.state_json->>'batch_size')::integer), true) t;
  IF taken_ordinals IS NULL THEN
    -- Nothing from the cursor: "no batch" only when no item is pending at all (0010).
    SELECT coalesce(sum(l.remaining), 0)::integer INTO in_flight_now
    FROM "assistant_operation_lease" l WHERE l.operation_id = p_operation AND l.remaining > 0;
    IF op.total_items - op.completed_count - op.failed_count
       - coalesce((op.state_json->>'abandoned_count')::integer, 0) - in_flight_now > 0 THEN
      RETURN;
    END IF;
    DELETE FROM "assistant_operation_lease" WHERE operation_id = p_operation AND remaining <= 0;
    RETURN QUERY
    WITH moved AS (
      UPDATE "assistant_operation" o
      SET state_json = jsonb_set(o.state_json, '{cursor}', to_jsonb(o.total_items)), updated_at = now()
      WHERE o.id = p_operation AND (o.state_json->>'cursor')::integer < o.total_items
      RETURNING o.*),
    found AS (
      SELECT * FROM moved
      UNION ALL
      SELECT o.* FROM "assistant_operation" o WHERE o.id = p_operation AND NOT EXISTS (SELECT 1 FROM moved))
    SELECT c.id, c.conversation_id, c.organization_id, c.operation_type, c.status, c.total_items,
           c.completed_count, c.failed_count, c.state_json, c.created_at, c.updated_at,
           in_flight_now, ARRAY[]::text[]
    FROM found c;
    RETURN;
  END IF;
  INSERT INTO "operation_event" (operation_id, organization_id, kind, actor, data)
  VALUES (p_operation, p_organization, 'batch_leased', p_owner, jsonb_build_object(
    'count', cardinality(taken_ordinals), 'first_ordinal', taken_ordinals[1],
    'last_ordinal', taken_ordinals[cardinality(taken_ordinals)]));
  DELETE FROM "assistant_operation_lease" WHERE operation_id = p_operation AND remaining <= 0;
  -- Last: concurrent leases wait for each other only on this update; the cursor only moves forward.
  RETURN QUERY
  WITH moved AS (
    UPDATE "assistant_operation" o
    SET state_json = jsonb_set(o.state_json, '{cursor}', to_jsonb(GREATEST(
          (o.state_json->>'cursor')::integer, taken_ordinals[cardinality(taken_ordinals)] + 1))),
        updated_at = now()
    WHERE o.id = p_operation
    RETURNING o.*)
  SELECT m.id, m.conversation_id, m.organization_id, m.operation_type, m.status, m.total_items,
         m.completed_count, m.failed_count, m.state_json, m.created_at, m.updated_at,
         (SELECT coalesce(sum(l.remaining), 0)::integer FROM "assistant_operation_lease" l
          WHERE l.operation_id = p_operation AND l.remaining > 0),
         taken_ids
  FROM moved m;
END
$$;--> statement-breakpoint
CREATE OR REPLACE FUNCTION "opspad_record_step"(
  p_operation uuid, p_organization uuid, p_conversation uuid, p_owner text,
  p_ids text[], p_reasons text[])
RETURNS TABLE (
  id uuid, conversation_id uuid, organization_id uuid, operation_type varchar, status varchar,
  total_items integer, completed_count integer, failed_count integer, state_json jsonb,
  created_at timestamptz, updated_at timestamptz, in_flight integer)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
#variable_conflict use_column
DECLARE
  op "assistant_operation"%ROWTYPE;
  done_completed integer;
  done_failed integer;
BEGIN
  SELECT * INTO op FROM "assistant_operation" o
  WHERE o.id = p_operation AND o.organization_id = p_organization AND o.conversation_id = p_conversation
  FOR KEY SHARE;
  IF NOT FOUND OR coalesce(cardinality(p_ids), 0) = 0 OR op.status NOT IN ('active', 'paused')
     OR coalesce((op.state_json->>'max_failure_rate')::double precision, 0) > 0 THEN
    RETURN;
  END IF;
  SELECT r.done_completed, r.done_failed INTO done_completed, done_failed
  FROM opspad_record_owned(p_operation, p_owner, p_ids, p_reasons) r;
  INSERT INTO "operation_event" (operation_id, organization_id, kind, actor, data)
  VALUES (p_operation, p_organization, 'batch_recorded', p_owner, jsonb_build_object(
    'completed', done_completed, 'failed', done_failed, 'already_recorded', 0, 'lease_conflicts', 0));
  DELETE FROM "assistant_operation_lease" WHERE operation_id = p_operation AND remaining <= 0;
  -- Last: concurrent records wait for each other only on this update; the counters commute.
  RETURN QUERY
  WITH counted AS (
    UPDATE "assistant_operation" o
    SET completed_count = o.completed_count + done_completed, failed_count = o.failed_count + done_failed,
        updated_at = now()
    WHERE o.id = p_operation
    RETURNING o.*)
  SELECT c.id, c.conversation_id, c.organization_id, c.operation_type, c.status, c.total_items,
         c.completed_count, c.failed_count, c.state_json, c.created_at, c.updated_at,
         (SELECT coalesce(sum(l.remaining), 0)::integer FROM "assistant_operation_lease" l
          WHERE l.operation_id = p_operation AND l.remaining > 0)
  FROM counted c;
END
$$;--> statement-breakpoint
CREATE OR REPLACE FUNCTION "opspad_record_lease_step"(
  p_operation uuid, p_organization uuid, p_conversation uuid, p_owner text,
  p_ids text[], p_reasons text[], p_lease_seconds double precision, p_limit integer, p_epoch integer)
RETURNS TABLE (
  id uuid, conversation_id uuid, organization_id uuid, operation_type varchar, status varchar,
  total_items integer, completed_count integer, failed_count integer, state_json jsonb,
  created_at timestamptz, updated_at timestamptz, in_flight integer, item_ids text[], lease text)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
#variable_conflict use_column
DECLARE
  op "assistant_operation"%ROWTYPE;
  done_completed integer;
  done_failed integer;
  taken_ordinals integer[];
  taken_ids text[];
  in_flight_now integer;
  lease_state text := 'declined';
  new_cursor integer;
BEGIN
  SELECT * INTO op FROM "assistant_operation" o
  WHERE o.id = p_operation AND o.organization_id = p_organization AND o.conversation_id = p_conversation
  FOR KEY SHARE;
  IF NOT FOUND OR coalesce(cardinality(p_ids), 0) = 0 OR op.status NOT IN ('active', 'paused')
     OR coalesce((op.state_json->>'max_failure_rate')::double precision, 0) > 0 THEN
    RETURN;
  END IF;
  SELECT r.done_completed, r.done_failed INTO done_completed, done_failed
  FROM opspad_record_owned(p_operation, p_owner, p_ids, p_reasons) r;
  INSERT INTO "operation_event" (operation_id, organization_id, kind, actor, data)
  VALUES (p_operation, p_organization, 'batch_recorded', p_owner, jsonb_build_object(
    'completed', done_completed, 'failed', done_failed, 'already_recorded', 0, 'lease_conflicts', 0));
  DELETE FROM "assistant_operation_lease" WHERE operation_id = p_operation AND remaining <= 0;

  -- The lease, on opspad_lease_step's conditions; the owner's own lease row, spent by the
  -- record, is gone by now.
  IF op.status = 'active'
     AND (p_epoch IS NULL OR op.state_json->'dispatch_epoch' IS NOT DISTINCT FROM to_jsonb(p_epoch))
     AND NOT EXISTS (SELECT 1 FROM "assistant_operation_lease" l
                     WHERE l.operation_id = p_operation
                       AND (l.owner = p_owner OR (l.remaining > 0 AND l.expires_at < now()))) THEN
    SELECT array_agg(t.leased_ordinal ORDER BY t.leased_ordinal), array_agg(t.leased_item_id ORDER BY t.leased_ordinal)
    INTO taken_ordinals, taken_ids
    FROM opspad_lease_items(p_operation, p_owner, p_lease_seconds, (op.state_json->>'cursor')::integer,
                            coalesce(p_limit, (op.state_json->>'batch_size')::integer), true) t;
    IF taken_ordinals IS NOT NULL THEN
      lease_state := 'leased';
      new_cursor := taken_ordinals[cardinality(taken_ordinals)] + 1;
      INSERT INTO "operation_event" (operation_id, organization_id, kind, actor, data)
      VALUES (p_operation, p_organization, 'batch_leased', p_owner, jsonb_build_object(
        'count', cardinality(taken_ordinals), 'first_ordinal', taken_ordinals[1],
        'last_ordinal', taken_ordinals[cardinality(taken_ordinals)]));
    ELSE
      -- Nothing from the cursor: "no batch" only when no item is pending at all, with this
      -- call's own record added to the row's counters.
      SELECT coalesce(sum(l.remaining), 0)::integer INTO in_flight_now
      FROM "assistant_operation_lease" l WHERE l.operation_id = p_operation AND l.remaining > 0;
      IF op.total_items - op.completed_count - done_completed - op.failed_count - done_failed
         - coalesce((op.state_json->>'abandoned_count')::integer, 0) - in_flight_now <= 0 THEN
        lease_state := 'none';
        new_cursor := op.total_items;
      END IF;
    END IF;
  END IF;

  -- Last: concurrent calls wait for each other only on this update; the counters commute and
  -- the cursor only moves forward.
  RETURN QUERY
  WITH moved AS (
    UPDATE "assistant_operation" o
    SET completed_count = o.completed_count + done_completed, failed_count = o.failed_count + done_failed,
        state_json = CASE WHEN new_cursor IS NULL OR (o.state_json->>'cursor')::integer >= new_cursor THEN o.state_json
                          ELSE jsonb_set(o.state_json, '{cursor}', to_jsonb(new_cursor)) END,
        updated_at = now()
    WHERE o.id = p_operation
    RETURNING o.*)
  SELECT m.id, m.conversation_id, m.organization_id, m.operation_type, m.status, m.total_items,
         m.completed_count, m.failed_count, m.state_json, m.created_at, m.updated_at,
         (SELECT coalesce(sum(l.remaining), 0)::integer FROM "assistant_operation_lease" l
          WHERE l.operation_id = p_operation AND l.remaining > 0),
         coalesce(taken_ids, ARRAY[]::text[]), lease_state
  FROM moved m;
END
$$;
