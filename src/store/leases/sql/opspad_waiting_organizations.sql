-- The fleet's view of who waits for a handler type's worker slots (worker-demand.ts): per
-- organization with active background operations of the type, the lanes its work not handed out
-- can use and its fair-share weight. Read on every arrival of an operation, so with many small
-- operations tens of times a second. Bitmap and sequential scans are off: a plain scan of the
-- partial index of active operations marks the entries of operations that have ended (dead
-- rows until a vacuum) so later scans skip them, where a bitmap scan visits every one of their
-- heap pages again on each read (10,000 small operations: 2.95 ms a read, 0.6 ms with the marks).
CREATE OR REPLACE FUNCTION opspad_waiting_organizations(p_type text, p_prefix text, p_batch_size integer, p_default_lanes integer, p_weight_default integer, p_weight_min integer, p_weight_max integer, p_limit integer)
 RETURNS TABLE(organization_id uuid, lanes integer, weight integer)
 LANGUAGE plpgsql
 STABLE
 SET enable_bitmapscan TO 'off'
 SET enable_seqscan TO 'off'
AS $function$
#variable_conflict use_column
BEGIN
  RETURN QUERY
  SELECT * FROM (
    SELECT o.organization_id,
           coalesce(sum(least(coalesce((o.state_json->>'max_parallel_batches')::int, p_default_lanes),
                              ceil((o.total_items - (o.state_json->>'cursor')::int)::numeric
                                   / greatest(1, coalesce(p_batch_size, (o.state_json->>'batch_size')::int)))))
                    FILTER (WHERE (o.state_json->>'cursor')::int < o.total_items
                              AND NOT EXISTS (SELECT 1 FROM operation_throttle t
                                              WHERE t.operation_id = o.id AND t.until > now())), 0)::int AS lanes,
           least(p_weight_max, greatest(p_weight_min, coalesce(max(q.fair_share_weight), p_weight_default)))::int AS weight
    FROM assistant_operation o
    LEFT JOIN organization_quota q ON q.organization_id = o.organization_id
    WHERE o.status = 'active' AND o.operation_type = p_type AND o.state_json->>'execution' = 'background'
      AND coalesce(o.state_json->>'queue_prefix', p_prefix) = p_prefix
    GROUP BY o.organization_id
  ) fleet
  -- Cut beyond the limit, those with work waiting are kept first.
  ORDER BY fleet.lanes > 0 DESC
  LIMIT p_limit;
END;
$function$;
