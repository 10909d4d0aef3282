/**
 * Every operation of one conversation, finished ones included, newest first: what an MCP
 * client's `tasks/list` shows (src/mcp/task-store.ts) and `GET /v1/conversations/:id/operations`.
 * Paged by keyset on the operation id, which is time-ordered (operation-id.ts): a page is the
 * `limit` operations older than `before`, so a page costs the same however many came before.
 *
 * Cost: the conversation's operations through its index, sorted; one lease sum per row shown.
 */
import type { ListedOperation } from '../../domain/operation.ts';
import type { Queryable } from '../db/db.ts';
import { IN_FLIGHT_COLUMN } from '../leases/item-sql.ts';
import type { ConversationScope } from '../tenants/conversation-repo.ts';
import { LISTED_COLUMNS } from './operation-row.ts';

export interface ConversationOperationsPage {
  operations: (ListedOperation & { in_flight_count: number })[];
  /** The `before` of the next page; null when this one is the last. */
  nextBefore: string | null;
}

export async function listConversationOperations(
  db: Queryable,
  scope: ConversationScope,
  { before, limit }: { before?: string; limit: number },
): Promise<ConversationOperationsPage> {
  const operations = await db.query<ListedOperation & { in_flight_count: number }>(
    `SELECT ${LISTED_COLUMNS('o.')}, ${IN_FLIGHT_COLUMN}
     FROM assistant_operation o
     WHERE o.organization_id = $1 AND o.conversation_id = $2 AND ($3::uuid IS NULL OR o.id < $3::uuid)
     ORDER BY o.id DESC
     LIMIT $4`,
    [scope.organizationId, scope.conversationId, before ?? null, limit + 1],
  );
  const more = operations.length > limit;
  const shown = more ? operations.slice(0, limit) : operations;
  return { operations: shown, nextBefore: more ? (shown.at(-1)?.id ?? null) : null };
}
