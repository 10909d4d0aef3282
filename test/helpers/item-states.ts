/**
 * Item rows as the API shows them. A lease lives only in assistant_operation_lease
 * (drizzle/0013_item_written_once.sql): a pending item whose ordinal is in a lease row with items
 * remaining is leased, to that row's owner, until its expiry. Use as a subquery:
 * `SELECT … FROM (${ITEM_STATES}) i WHERE i.operation_id = $1`.
 */
import type { Queryable } from '../../src/store/db/db.ts';

export const ITEM_STATES = `SELECT i.operation_id, i.ordinal, i.item_id,
       CASE WHEN l.owner IS NULL THEN i.status ELSE 'leased' END AS status, i.attempts,
       l.owner AS lease_owner, l.expires_at AS lease_expires_at, i.reason, i.updated_at
     FROM assistant_operation_item i
     LEFT JOIN assistant_operation_lease l ON l.operation_id = i.operation_id AND l.remaining > 0
       AND i.status = 'pending' AND i.ordinal = ANY(l.ordinals)`;

/** Makes the operation's leases (only `owner`'s, when given) expired a minute ago. */
export async function expireLeases(db: Queryable, operationId: string, owner?: string): Promise<void> {
  await db.query(
    `UPDATE assistant_operation_lease SET expires_at = now() - interval '1 minute'
     WHERE operation_id = $1 AND ($2::text IS NULL OR owner = $2)`,
    [operationId, owner ?? null],
  );
}
