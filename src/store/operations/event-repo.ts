/** The append-only audit trail of operations: what happened, when, and who did it. */
import { OPERATION_EVENT_KINDS } from '../../domain/operation-output.ts';
import type { Queryable } from '../db/db.ts';
import { prepared } from '../db/prepared.ts';

export { OPERATION_EVENT_KINDS };

export type OperationEventKind = (typeof OPERATION_EVENT_KINDS)[number];

export interface NewOperationEvent {
  operationId: string;
  organizationId: string;
  kind: OperationEventKind;
  actor: string;
  data: Record<string, unknown>;
}

const APPEND_EVENT_SQL = prepared(`INSERT INTO operation_event (operation_id, organization_id, kind, actor, data)
     VALUES ($1, $2, $3, $4, $5::jsonb)`);

export async function appendEvent(tx: Queryable, event: NewOperationEvent): Promise<void> {
  await tx.query(APPEND_EVENT_SQL, [
    event.operationId,
    event.organizationId,
    event.kind,
    event.actor,
    JSON.stringify(event.data),
  ]);
}

export interface OperationEvent {
  id: number;
  kind: OperationEventKind;
  actor: string;
  data: Record<string, unknown>;
  created_at: Date;
}

/** Events of one operation after `afterId`, oldest first, scoped to the organization. */
export async function listEvents(
  db: Queryable,
  organizationId: string,
  operationId: string,
  afterId = 0,
  limit = 100,
): Promise<OperationEvent[]> {
  return db.query<OperationEvent>(
    `SELECT id::int AS id, kind, actor, data, created_at FROM operation_event
     WHERE organization_id = $1 AND operation_id = $2 AND id > $3
     ORDER BY id LIMIT $4`,
    [organizationId, operationId, afterId, limit],
  );
}

/**
 * The actor of each operation's last `paused` event, for operations paused before `paused_by`
 * was kept in their state (one query, by the (operation_id, id) index).
 */
export async function lastPauseActors(
  db: Queryable,
  organizationId: string,
  operationIds: readonly string[],
): Promise<Map<string, string>> {
  if (operationIds.length === 0) {
    return new Map();
  }
  const rows = await db.query<{ operation_id: string; actor: string }>(
    `SELECT DISTINCT ON (operation_id) operation_id, actor FROM operation_event
     WHERE organization_id = $1 AND operation_id = ANY($2::uuid[]) AND kind = 'paused'
     ORDER BY operation_id, id DESC`,
    [organizationId, operationIds],
  );
  return new Map(rows.map((row) => [row.operation_id, row.actor]));
}
