/**
 * Open operations across an organization's conversations: how an assistant that knows nothing
 * (a new chat of a desktop client that shares one `opspad mcp` between chats) re-finds its work.
 * Scoped by organization like every query; reached through the organization's conversations
 * (their organization index, then each one's operations), so it reads no other tenant's rows.
 */
import type { ListedOperation } from '../../domain/operation.ts';
import type { Queryable } from '../db/db.ts';
import { IN_FLIGHT_COLUMN } from '../leases/item-sql.ts';
import { OPEN_STATUSES_SQL } from './status-sql.ts';

export interface OrganizationOpenOperations {
  operations: (ListedOperation & { in_flight_count: number })[];
  /** Every open operation the filter matches, including those past `limit`. */
  total: number;
}

/** Like every list, without query_params (up to OPSPAD_MAX_QUERY_PARAMS_BYTES each). */
const COLUMNS = `o.id, o.conversation_id, o.organization_id, o.operation_type, o.status, o.total_items,
  o.completed_count, o.failed_count, o.state_json - 'query_params' AS state_json, o.created_at, o.updated_at`;

/**
 * Active and paused operations of the organization, active first then most recently touched,
 * leaving out `exceptConversationId`'s (the caller shows those already).
 */
export async function listOpenOperationsInOrganization(
  db: Queryable,
  organizationId: string,
  { exceptConversationId, limit }: { exceptConversationId?: string; limit: number },
): Promise<OrganizationOpenOperations> {
  const where = `c.organization_id = $1 AND o.organization_id = $1 AND o.status IN (${OPEN_STATUSES_SQL})
    AND ($2::uuid IS NULL OR o.conversation_id <> $2::uuid)`;
  const params = [organizationId, exceptConversationId ?? null];
  const operations = await db.query<ListedOperation & { in_flight_count: number }>(
    `SELECT ${COLUMNS},
       ${IN_FLIGHT_COLUMN}
     FROM assistant_conversation c JOIN assistant_operation o ON o.conversation_id = c.id
     WHERE ${where}
     ORDER BY (o.status = 'active') DESC, o.updated_at DESC, o.id
     LIMIT $3`,
    [...params, limit],
  );
  const total =
    operations.length < limit
      ? operations.length
      : ((
          await db.query<{ n: number }>(
            `SELECT count(*)::int AS n FROM assistant_conversation c
             JOIN assistant_operation o ON o.conversation_id = c.id WHERE ${where}`,
            params,
          )
        )[0]?.n ?? 0);
  return { operations, total };
}
