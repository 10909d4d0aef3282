/**
 * What the worker fleet reads to share its slots fairly and to bound a batch's time: which
 * organizations have background work of a type waiting, and how often an item has been leased.
 */
import { OPERATION_DEFAULTS } from '../../domain/operation-input.ts';
import type { Queryable } from '../db/db.ts';
import type { ConversationScope } from '../tenants/conversation-repo.ts';

/** More organizations than this waiting for one type are cut from the view (an arbitrary subset). */
const MAX_WAITING_ORGANIZATIONS = 10_000;

export interface WaitingWorkQuery {
  operationType: string;
  /** This deployment's BullMQ prefix: another deployment's operations are not ours to share. */
  queuePrefix: string;
  /** The handler's fixed batch size, when it has one (else each operation's own batch_size). */
  batchSize: number | undefined;
}

/**
 * Organizations with active background operations of a type that still have items not handed
 * out (the cursor before the end), each with the lanes that work can use: per operation
 * `min(max_parallel_batches, batches left)`, as the dispatcher starts them. Crosses
 * organizations on purpose — it is the fleet's view, returns ids and counts only, and no tenant
 * ever sees it. Reads the partial index of active operations.
 */
export async function listWaitingOrganizations(db: Queryable, query: WaitingWorkQuery): Promise<Map<string, number>> {
  const rows = await db.query<{ organization_id: string; lanes: number }>(
    `SELECT organization_id,
            sum(least(coalesce((state_json->>'max_parallel_batches')::int, $4::int),
                      ceil((total_items - (state_json->>'cursor')::int)::numeric
                           / greatest(1, coalesce($3::int, (state_json->>'batch_size')::int)))))::int AS lanes
     FROM assistant_operation
     WHERE status = 'active' AND operation_type = $1 AND state_json->>'execution' = 'background'
       AND coalesce(state_json->>'queue_prefix', $2) = $2
       AND (state_json->>'cursor')::int < total_items
     GROUP BY organization_id
     LIMIT ${MAX_WAITING_ORGANIZATIONS}`,
    [query.operationType, query.queuePrefix, query.batchSize ?? null, OPERATION_DEFAULTS.maxParallelBatches],
  );
  return new Map(rows.filter((row) => row.lanes > 0).map((row) => [row.organization_id, row.lanes]));
}

/**
 * How many times each of `itemIds` has been leased, among those still leased to `owner`: the
 * `attempts` column counts the leases that ended, and the live one is one more. Scoped by
 * organization.
 */
export async function leaseCountsOf(
  db: Queryable,
  scope: ConversationScope,
  operationId: string,
  owner: string,
  itemIds: readonly string[],
): Promise<Map<string, number>> {
  if (itemIds.length === 0) {
    return new Map();
  }
  const rows = await db.query<{ item_id: string; attempts: number }>(
    `SELECT i.item_id, i.attempts + 1 AS attempts
     FROM assistant_operation_item i
     JOIN assistant_operation o ON o.id = i.operation_id
     WHERE i.operation_id = $1 AND o.organization_id = $2 AND o.conversation_id = $3
       AND i.status = 'pending' AND i.item_id = ANY($5::text[])
       AND i.ordinal IN (SELECT unnest(l.ordinals) FROM assistant_operation_lease l
                         WHERE l.operation_id = $1 AND l.owner = $4)`,
    [operationId, scope.organizationId, scope.conversationId, owner, itemIds],
  );
  return new Map(rows.map((row) => [row.item_id, row.attempts]));
}
