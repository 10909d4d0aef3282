/** The append-only audit trail of operations: what happened, when, and who did it. */
import { OPERATION_EVENT_KINDS } from '../domain/operation-output.ts';
import type { Queryable } from './db.ts';

export { OPERATION_EVENT_KINDS };

export type OperationEventKind = (typeof OPERATION_EVENT_KINDS)[number];

export interface NewOperationEvent {
  operationId: string;
  organizationId: string;
  kind: OperationEventKind;
  actor: string;
  data: Record<string, unknown>;
}

export async function appendEvent(tx: Queryable, event: NewOperationEvent): Promise<void> {
  await tx.query(
    `INSERT INTO operation_event (operation_id, organization_id, kind, actor, data)
     VALUES ($1, $2, $3, $4, $5::jsonb)`,
    [event.operationId, event.organizationId, event.kind, event.actor, JSON.stringify(event.data)],
  );
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
