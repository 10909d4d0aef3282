/**
 * The reorganization sweep's statements: which pads changed since they were last reorganized,
 * what a reorganization examined, and its events.
 *
 * Lock order: none (single statements). Cost: the sweep's list is bounded by `limit`; the others
 * touch one row.
 */
import { SCRATCHPAD_EVENT_STATUSES } from '../../domain/conversation-output.ts';
import type { Queryable } from '../db/db.ts';
import type { ConversationScope } from '../tenants/conversation-repo.ts';

/** Records that a reorganization examined `version` (so the sweep skips the pad until it changes). */
export async function markReorganized(db: Queryable, scope: ConversationScope, version: number): Promise<void> {
  await db.query(
    `UPDATE scratchpad SET reorganized_version = greatest(reorganized_version, $3)
     WHERE conversation_id = $1 AND organization_id = $2`,
    [scope.conversationId, scope.organizationId, version],
  );
}

export { SCRATCHPAD_EVENT_STATUSES };
export type ScratchpadEventStatus = (typeof SCRATCHPAD_EVENT_STATUSES)[number];

export async function appendScratchpadEvent(
  db: Queryable,
  scope: ConversationScope,
  status: ScratchpadEventStatus,
  data: Record<string, unknown>,
): Promise<void> {
  await db.query(
    `INSERT INTO scratchpad_event (conversation_id, organization_id, kind, status, data)
     VALUES ($1, $2, 'reorganization', $3, $4::jsonb)`,
    [scope.conversationId, scope.organizationId, status, JSON.stringify(data)],
  );
}

export interface ScratchpadEvent {
  id: number;
  kind: string;
  status: ScratchpadEventStatus;
  data: Record<string, unknown>;
  created_at: Date;
}

export async function listScratchpadEvents(
  db: Queryable,
  scope: ConversationScope,
  afterId: number,
  limit: number,
): Promise<ScratchpadEvent[]> {
  return db.query<ScratchpadEvent>(
    `SELECT id::int AS id, kind, status, data, created_at FROM scratchpad_event
     WHERE conversation_id = $1 AND organization_id = $2 AND id > $3 ORDER BY id LIMIT $4`,
    [scope.conversationId, scope.organizationId, afterId, limit],
  );
}

/**
 * Pads changed since their last reorganization, every organization, least recently changed
 * first: what the scheduled sweep hands out, `limit` at a time.
 */
export async function listPadsToReorganizeAllOrganizations(
  db: Queryable,
  limit: number,
): Promise<(ConversationScope & { version: number })[]> {
  const rows = await db.query<{ conversation_id: string; organization_id: string; version: number }>(
    `SELECT conversation_id, organization_id, version FROM scratchpad
     WHERE version > reorganized_version ORDER BY updated_at LIMIT $1`,
    [limit],
  );
  return rows.map((r) => ({
    conversationId: r.conversation_id,
    organizationId: r.organization_id,
    version: r.version,
  }));
}
