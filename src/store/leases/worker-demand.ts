/**
 * What the worker fleet reads to share its slots fairly and to bound a batch's time: which
 * organizations have background work of a type waiting and with what weight, and how often an
 * item has been leased.
 */
import { FAIR_SHARE_WEIGHT } from '../../domain/fair-share.ts';
import { OPERATION_DEFAULTS } from '../../domain/operation-input.ts';
import type { Queryable } from '../db/db.ts';
import type { ConversationScope } from '../tenants/conversation-repo.ts';

/**
 * More organizations than this with active work of one type are cut from the view (an arbitrary
 * subset).
 */
const MAX_WAITING_ORGANIZATIONS = 10_000;

export interface WaitingWorkQuery {
  operationType: string;
  /** This deployment's BullMQ prefix: another deployment's operations are not ours to share. */
  queuePrefix: string;
  /** The handler's fixed batch size, when it has one (else each operation's own batch_size). */
  batchSize: number | undefined;
}

/** The fleet's view of who competes for a type's slots, and with what weight. */
export interface WaitingOrganizations {
  /** Organizations with work not handed out: (organization, lanes, fair-share weight). */
  waiting: [organization: string, lanes: number, weight: number][];
  /**
   * The weight of every organization with active background work of the type, handed out or
   * not: a candidate whose last batches are out is no longer waiting but still has a weight.
   */
  weights: Map<string, number>;
}

/**
 * Organizations with active background operations of a type, each with the lanes its work not
 * yet handed out (the cursor before the end) can use — per operation `min(max_parallel_batches,
 * batches left)`, as the dispatcher starts them — and its fair-share weight
 * (organization_quota.fair_share_weight; unset: 1; held to 1..100 whatever the row says).
 * An operation whose work waits on its handler's provider limit (operation_throttle, in force)
 * is not waiting for slots: a slot kept for it would stay idle (docs/provider-limits.md).
 * Crosses organizations on purpose — it is the fleet's view, returns ids and figures only, and
 * no tenant ever sees it. Reads the partial index of active operations, and one quota row per
 * organization (opspad_waiting_organizations).
 */
export async function listWaitingOrganizations(db: Queryable, query: WaitingWorkQuery): Promise<WaitingOrganizations> {
  // opspad_waiting_organizations.sql says why it is a function: the scan it must use.
  const rows = await db.query<{ organization_id: string; lanes: number; weight: number }>(
    'SELECT * FROM opspad_waiting_organizations($1, $2, $3, $4, $5, $6, $7, $8)',
    [
      query.operationType,
      query.queuePrefix,
      query.batchSize ?? null,
      OPERATION_DEFAULTS.maxParallelBatches,
      FAIR_SHARE_WEIGHT.default,
      FAIR_SHARE_WEIGHT.min,
      FAIR_SHARE_WEIGHT.max,
      MAX_WAITING_ORGANIZATIONS,
    ],
  );
  return {
    waiting: rows.filter((row) => row.lanes > 0).map((row) => [row.organization_id, row.lanes, row.weight]),
    weights: new Map(rows.map((row) => [row.organization_id, row.weight])),
  };
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
