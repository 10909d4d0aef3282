/**
 * What lets a new active operation into a conversation (create, resume, retry_failed): the one
 * active before it is paused (or, for a bulk resume, the resume refused), and a background one
 * must fit the organization's limit.
 *
 * Lock order: the caller holds the conversation's lock; pauseActive then updates the active
 * operation row; assertBackgroundCapacity takes an advisory lock per organization.
 * Cost: pauseActive is one UPDATE over the conversation's open operations (its index);
 * assertBackgroundCapacity counts the organization's active operations (bounded by the limit's
 * order of magnitude, OPSPAD_MAX_ACTIVE_BACKGROUND).
 */
import { AppError } from '../../domain/errors.ts';
import type { Queryable } from '../db/db.ts';
import type { ConversationScope } from '../tenants/conversation-repo.ts';
import { rethrowAdmissionRefusal } from './admission-refusals.ts';

/**
 * Refuses a new active background operation when the organization already has `limit` of them
 * (sql/opspad_assert_background_capacity.sql: an advisory lock per organization serializes the
 * check, so concurrent creates cannot both pass).
 */
export async function assertBackgroundCapacity(
  tx: Queryable,
  organizationId: string,
  limit: number | undefined,
): Promise<void> {
  if (limit === undefined) {
    return;
  }
  await tx
    .query('SELECT opspad_assert_background_capacity($1, $2)', [organizationId, limit])
    .catch(rethrowAdmissionRefusal);
}

/** Pauses the conversation's active operation, if any, other than `exceptId` (sql/opspad_pause_active.sql). */
export async function pauseActive(
  tx: Queryable,
  scope: ConversationScope,
  actor: string,
  reason: string,
  exceptId?: string,
): Promise<string | null> {
  const rows = await tx.query<{ id: string | null }>('SELECT opspad_pause_active($1, $2, $3, $4, $5) AS id', [
    scope.organizationId,
    scope.conversationId,
    exceptId ?? null,
    reason,
    actor,
  ]);
  return rows[0]?.id ?? null;
}

/**
 * Refuses making `operationId` active while another operation of the conversation is: a bulk
 * resume resumes each operation on its own, never pausing another. Under the conversation's
 * lock, so it sees every resume, create and retry of the conversation committed before it.
 */
export async function assertNoOtherActive(tx: Queryable, scope: ConversationScope, operationId: string): Promise<void> {
  const [other] = await tx.query<{ id: string }>(
    `SELECT id FROM assistant_operation
     WHERE organization_id = $1 AND conversation_id = $2 AND status = 'active' AND id <> $3`,
    [scope.organizationId, scope.conversationId, operationId],
  );
  if (other) {
    throw new AppError(
      'conflict',
      `operation ${other.id} is active in its conversation, and resuming this one would pause it; resume it on its own if that is meant`,
      { active_operation_id: other.id },
    );
  }
}
