/**
 * The sessions of `/mcp`. A session is a row, not a process's memory: any API process serves any
 * request of any session, and a restart loses none (src/api/mcp/). Every statement is scoped by
 * organization: another organization's session id is not found, like a random one.
 *
 * Bounds: an organization keeps at most `maxSessions` sessions (opening one more closes the
 * least recently used) and a session untouched for `idleMs` is gone (not found, then deleted
 * when its organization opens the next one).
 * Lock order: none beyond the rows each statement writes.
 */
import type { Database, Queryable } from '../db/db.ts';

export interface McpSessionRow {
  id: string;
  home_conversation_id: string;
  pinned: boolean;
  last_operation_id: string | null;
  home_operation_ids: string[];
  /** Seconds since the session was last touched. */
  idle_seconds: number;
}

export interface McpSessionBounds {
  maxSessions: number;
  idleMs: number;
}

/** Opens a session of `organizationId` and returns its id, after closing expired and excess ones. */
export async function openMcpSession(
  db: Database,
  organizationId: string,
  session: { homeConversationId: string; pinned: boolean; clientName: string | null },
  bounds: McpSessionBounds,
): Promise<string> {
  return db.transaction(async (tx) => {
    await tx.query(
      `DELETE FROM mcp_session WHERE organization_id = $1 AND touched_at < now() - make_interval(secs => $2)`,
      [organizationId, bounds.idleMs / 1000],
    );
    // The newest maxSessions - 1 stay: with the new one, maxSessions.
    await tx.query(
      `DELETE FROM mcp_session WHERE id IN (
         SELECT id FROM mcp_session WHERE organization_id = $1
         ORDER BY touched_at DESC OFFSET $2)`,
      [organizationId, Math.max(0, bounds.maxSessions - 1)],
    );
    const rows = await tx.query<{ id: string }>(
      `INSERT INTO mcp_session (organization_id, home_conversation_id, pinned, client_name)
       VALUES ($1, $2, $3, $4) RETURNING id`,
      [organizationId, session.homeConversationId, session.pinned, session.clientName],
    );
    const id = rows[0]?.id;
    if (!id) {
      throw new Error('opening the MCP session returned no row');
    }
    return id;
  });
}

/** The live session `id` of the organization, or null (unknown, another organization's, or idle too long). */
export async function findMcpSession(
  db: Queryable,
  organizationId: string,
  id: string,
  idleMs: number,
): Promise<McpSessionRow | null> {
  const rows = await db.query<McpSessionRow>(
    `SELECT id, home_conversation_id, pinned, last_operation_id, home_operation_ids,
            extract(epoch FROM now() - touched_at)::float8 AS idle_seconds
     FROM mcp_session
     WHERE id = $1 AND organization_id = $2 AND touched_at >= now() - make_interval(secs => $3)`,
    [id, organizationId, idleMs / 1000],
  );
  return rows[0] ?? null;
}

/** Stores what the session learnt (the operation it last named, those it created at home) and touches it. */
export async function saveMcpSession(
  db: Queryable,
  organizationId: string,
  id: string,
  memory: { lastOperationId: string | null; homeOperationIds: readonly string[] },
): Promise<void> {
  await db.query(
    `UPDATE mcp_session SET last_operation_id = $3, home_operation_ids = $4::uuid[], touched_at = now()
     WHERE id = $1 AND organization_id = $2`,
    [id, organizationId, memory.lastOperationId, memory.homeOperationIds],
  );
}

/** Marks the session used now (its idle time starts again). */
export async function touchMcpSession(db: Queryable, organizationId: string, id: string): Promise<void> {
  await db.query('UPDATE mcp_session SET touched_at = now() WHERE id = $1 AND organization_id = $2', [
    id,
    organizationId,
  ]);
}

/** Ends a session (`DELETE /mcp`); false when the organization has no such session. */
export async function closeMcpSession(db: Queryable, organizationId: string, id: string): Promise<boolean> {
  const rows = await db.query('DELETE FROM mcp_session WHERE id = $1 AND organization_id = $2 RETURNING id', [
    id,
    organizationId,
  ]);
  return rows.length > 0;
}
