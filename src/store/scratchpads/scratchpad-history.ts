/**
 * The scratchpad's history: earlier versions (keyset pages, counts only) and what each context
 * render told the assistant (written by render-log.ts).
 *
 * Lock order: none (appends and snapshot reads). Cost: one index range per page, bounded by `limit`.
 */
import type { PadCounts } from '../../domain/scratchpad.ts';
import type { Queryable } from '../db/db.ts';
import type { ConversationScope } from '../tenants/conversation-repo.ts';

export interface PadVersionSummary {
  version: number;
  source: string;
  reason: string;
  metadata: Record<string, unknown>;
  created_at: Date;
  counts: PadCounts;
}

/** Versions, newest first, before `beforeVersion` (keyset pages). */
export async function listPadVersions(
  db: Queryable,
  scope: ConversationScope,
  beforeVersion: number,
  limit: number,
): Promise<PadVersionSummary[]> {
  const rows = await db.query<
    Omit<PadVersionSummary, 'counts'> & { goals: number; open_items: number; facts: number; refs: number }
  >(
    `SELECT v.version, v.source, v.reason, v.metadata, v.created_at,
            jsonb_array_length(v.pad->'goals') AS goals, jsonb_array_length(v.pad->'open_items') AS open_items,
            jsonb_array_length(v.pad->'facts') AS facts, jsonb_array_length(v.pad->'refs') AS refs
     FROM scratchpad_version v
     WHERE v.conversation_id = $1 AND v.organization_id = $2 AND v.version < $3
     ORDER BY v.version DESC LIMIT $4`,
    [scope.conversationId, scope.organizationId, beforeVersion, limit],
  );
  return rows.map(({ goals, open_items, facts, refs, ...rest }) => ({
    ...rest,
    counts: { goals, open_items, facts, refs },
  }));
}

export async function listContextRenders(db: Queryable, scope: ConversationScope, limit: number) {
  return db.query<{ id: number; pad_version: number; chars: number; sha256: string; created_at: Date }>(
    `SELECT id::int AS id, pad_version, chars, sha256, created_at FROM context_render
     WHERE conversation_id = $1 AND organization_id = $2 ORDER BY id DESC LIMIT $3`,
    [scope.conversationId, scope.organizationId, limit],
  );
}
