-- Reserves p_items stored items and one open operation for a new operation of the organization
-- (src/store/operations/operation-quota.ts), or raises OPS02 with the refusal's figures as JSON
-- in DETAIL: the statement fails, so nothing it wrote stays. p_max_stored and p_max_open are the
-- deployment's quotas; the organization's row may override them. Without them (null) the items
-- are counted and nothing is checked. The upsert locks the quota row to the end of the
-- transaction, so the creates of one organization take turns here and the count after it, a
-- statement of its own, sees every create committed before.
CREATE OR REPLACE FUNCTION opspad_reserve_quota(p_organization uuid, p_items bigint, p_max_stored bigint, p_max_open bigint)
 RETURNS void
 LANGUAGE plpgsql
AS $function$
DECLARE
  stored bigint;
  stored_limit bigint;
  own_stored_limit bigint;
  open_limit bigint;
  own_open_limit bigint;
  open_now integer;
BEGIN
  INSERT INTO organization_quota AS q (organization_id, stored_items) VALUES (p_organization, p_items)
  ON CONFLICT (organization_id) DO UPDATE SET stored_items = q.stored_items + excluded.stored_items
  RETURNING q.stored_items, q.max_stored_items, q.max_open_operations INTO stored, own_stored_limit, own_open_limit;
  IF p_max_stored IS NULL THEN
    RETURN;
  END IF;
  stored_limit := coalesce(own_stored_limit, p_max_stored);
  IF stored > stored_limit THEN
    RAISE EXCEPTION USING ERRCODE = 'OPS02', MESSAGE = 'quota exceeded: stored_items',
      DETAIL = jsonb_build_object('quota', 'stored_items', 'used', stored - p_items, 'requested', p_items,
                                  'limit', stored_limit, 'overridden', own_stored_limit IS NOT NULL)::text;
  END IF;
  open_limit := coalesce(own_open_limit, p_max_open);
  open_now := opspad_count_open_operations(p_organization, open_limit);
  IF open_now >= open_limit THEN
    RAISE EXCEPTION USING ERRCODE = 'OPS02', MESSAGE = 'quota exceeded: open_operations',
      DETAIL = jsonb_build_object('quota', 'open_operations', 'used', open_now, 'requested', 1,
                                  'limit', open_limit, 'overridden', own_open_limit IS NOT NULL)::text;
  END IF;
END
$function$;
