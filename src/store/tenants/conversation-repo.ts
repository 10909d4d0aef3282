/**
 * Conversations belong to exactly one organization: a conversation is (organization, id), the id
 * being the caller's. The same id used by two organizations is two conversations that never meet,
 * so there is nothing to squat and no answer that tells whether another organization uses an id.
 * They are created on first use.
 */
import type { Queryable } from '../db/db.ts';
import { prepared } from '../db/prepared.ts';

export interface ConversationScope {
  organizationId: string;
  conversationId: string;
}

/**
 * Creates the organization's conversation if it does not exist, then locks its row for the
 * rest of the transaction when `lock` is set. Creates, resumes and retries lock it first, so
 * concurrent ones in one conversation queue up instead of tripping the unique index.
 *
 * Both in one statement (tenants/sql/opspad_lock_conversation.sql, which the create's own call
 * takes first too): `ON CONFLICT DO UPDATE ... WHERE false` updates nothing but locks the row it
 * conflicts with (FOR UPDATE: the key is among the columns named), a row another transaction
 * has just inserted included, once that one commits. A row this statement inserts is invisible
 * to everyone else until commit, which is as good as the lock.
 */
const ENSURE_SQL = prepared(`INSERT INTO assistant_conversation (id, organization_id) VALUES ($1, $2)
     ON CONFLICT (organization_id, id) DO NOTHING`);
const ENSURE_LOCKED_SQL = prepared('SELECT opspad_lock_conversation($1, $2)');

export async function ensureConversation(
  tx: Queryable,
  scope: ConversationScope,
  { lock }: { lock: boolean },
): Promise<void> {
  await tx.query(lock ? ENSURE_LOCKED_SQL : ENSURE_SQL, [scope.conversationId, scope.organizationId]);
}

/** Whether the organization has used this conversation id (reading never creates it). */
export async function conversationExists(db: Queryable, scope: ConversationScope): Promise<boolean> {
  const rows = await db.query('SELECT 1 FROM assistant_conversation WHERE organization_id = $1 AND id = $2', [
    scope.organizationId,
    scope.conversationId,
  ]);
  return rows.length > 0;
}
