/**
 * Conversations belong to exactly one organization. They are created on first use with the id
 * the caller chose; the same id from another organization is "not found", never "forbidden",
 * so a key cannot even learn that another organization's conversation exists.
 */
import { AppError } from '../domain/errors.ts';
import type { Queryable } from './db.ts';

export interface ConversationScope {
  organizationId: string;
  conversationId: string;
}

export function conversationNotFound(conversationId: string): AppError {
  return new AppError('not_found', `Conversation ${conversationId} was not found.`, {
    conversation_id: conversationId,
  });
}

/**
 * Creates the conversation for the organization if it does not exist, then locks its row for
 * the rest of the transaction when `lock` is set. Creates, resumes and retries lock it first,
 * so concurrent ones in one conversation queue up instead of tripping the unique index.
 */
export async function ensureConversation(
  tx: Queryable,
  scope: ConversationScope,
  { lock }: { lock: boolean },
): Promise<void> {
  await tx.query(
    `INSERT INTO assistant_conversation (id, organization_id) VALUES ($1, $2)
     ON CONFLICT (id) DO NOTHING`,
    [scope.conversationId, scope.organizationId],
  );
  const rows = await tx.query(
    `SELECT 1 FROM assistant_conversation WHERE id = $1 AND organization_id = $2${lock ? ' FOR UPDATE' : ''}`,
    [scope.conversationId, scope.organizationId],
  );
  if (rows.length === 0) {
    throw conversationNotFound(scope.conversationId);
  }
}

/** Whether the conversation exists for another organization (then it is "not found"). */
export async function conversationOwner(db: Queryable, conversationId: string): Promise<string | null> {
  const rows = await db.query<{ organization_id: string }>(
    'SELECT organization_id FROM assistant_conversation WHERE id = $1',
    [conversationId],
  );
  return rows[0]?.organization_id ?? null;
}
