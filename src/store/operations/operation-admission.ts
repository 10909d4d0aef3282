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
import { NEWER_OPERATION } from '../../domain/paused-by.ts';
import type { Queryable } from '../db/db.ts';
import { XACT_LOCK_CLASS } from '../db/lock-keys.ts';
import type { ConversationScope } from '../tenants/conversation-repo.ts';
import { appendEvent } from './event-repo.ts';

/**
 * Refuses a new active background operation when the organization already has `limit` of them.
 * An advisory lock per organization serializes the check, so concurrent creates cannot both pass.
 */
export async function assertBackgroundCapacity(
  tx: Queryable,
  organizationId: string,
  limit: number | undefined,
): Promise<void> {
  if (limit === undefined) {
    return;
  }
  await tx.query('SELECT pg_advisory_xact_lock($1::int, hashtext($2::text))', [
    XACT_LOCK_CLASS.backgroundAdmission,
    organizationId,
  ]);
  const rows = await tx.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM assistant_operation
     WHERE organization_id = $1 AND status = 'active' AND state_json->>'execution' = 'background'`,
    [organizationId],
  );
  const active = rows[0]?.n ?? 0;
  if (active >= limit) {
    throw new AppError(
      'too_many_active_operations',
      `This organization already has ${active} active background operations, the most allowed (OPSPAD_MAX_ACTIVE_BACKGROUND = ${limit}). Wait for one to finish, or pause or cancel one.`,
      { active, limit },
    );
  }
}

/** The SET of an operation paused because a newer one became active; `reason`: a text parameter. */
export function pausedByNewerSet(reason: string): string {
  return `status = 'paused', updated_at = now(),
    state_json = state_json || jsonb_build_object('paused_reason', ${reason}::text, 'paused_by', '${NEWER_OPERATION}')`;
}

/** Pauses the conversation's active operation, if any, other than `exceptId`. */
export async function pauseActive(
  tx: Queryable,
  scope: ConversationScope,
  actor: string,
  reason: string,
  exceptId?: string,
): Promise<string | null> {
  const rows = await tx.query<{ id: string }>(
    `UPDATE assistant_operation SET ${pausedByNewerSet('$4')}
     WHERE organization_id = $1 AND conversation_id = $2 AND status = 'active'
       AND id IS DISTINCT FROM $3::uuid
     RETURNING id`,
    [scope.organizationId, scope.conversationId, exceptId ?? null, reason],
  );
  const paused = rows[0]?.id ?? null;
  if (paused) {
    await appendEvent(tx, {
      operationId: paused,
      organizationId: scope.organizationId,
      kind: 'paused',
      actor,
      data: { reason },
    });
  }
  return paused;
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
