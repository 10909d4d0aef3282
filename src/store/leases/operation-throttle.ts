/**
 * The throttled state of an operation's work (operation_throttle): written (and renewed) by a
 * worker that parks a batch at its key's provider limit, and read by
 * `get` and the context fragment so the assistant is told its operation waits on a provider's
 * limit rather than stalled. A row whose `until` has passed says nothing.
 */
import type { KeyLimits, OperationThrottle } from '../../domain/key-limits.ts';
import type { Queryable } from '../db/db.ts';
import type { ConversationScope } from '../tenants/conversation-repo.ts';

export interface ThrottleNote {
  operationId: string;
  /** The handler's own key (without the organization), '' for the organization's key. */
  key: string;
  limitedBy: 'rate' | 'concurrency';
  limits: KeyLimits;
  /** Until when it is expected to wait (ms since the epoch). */
  untilMs: number;
}

/** Notes (or renews) that the operation's work waits on its key's limit. */
export async function noteThrottled(db: Queryable, note: ThrottleNote): Promise<void> {
  await db.query(
    `INSERT INTO operation_throttle (operation_id, limit_key, reason, rate_max, rate_interval_ms, concurrency, until)
     SELECT id, $2, $3, $4, $5, $6, to_timestamp($7::double precision / 1000) FROM assistant_operation WHERE id = $1
     ON CONFLICT (operation_id) DO UPDATE SET limit_key = EXCLUDED.limit_key, reason = EXCLUDED.reason,
       rate_max = EXCLUDED.rate_max, rate_interval_ms = EXCLUDED.rate_interval_ms,
       concurrency = EXCLUDED.concurrency, until = EXCLUDED.until`,
    [
      note.operationId,
      note.key,
      note.limitedBy,
      note.limits.rate?.max ?? null,
      note.limits.rate?.intervalMs ?? null,
      note.limits.concurrency ?? null,
      note.untilMs,
    ],
  );
}

/** The operation's work runs again (it waited at its key's concurrency): no longer throttled. */
export async function clearThrottled(db: Queryable, operationId: string): Promise<void> {
  await db.query('DELETE FROM operation_throttle WHERE operation_id = $1', [operationId]);
}

/** The throttled state of the scope's operations among `operationIds` (in force now only). */
export async function throttlesOf(
  db: Queryable,
  scope: Pick<ConversationScope, 'organizationId'>,
  operationIds: readonly string[],
): Promise<Map<string, OperationThrottle>> {
  if (operationIds.length === 0) {
    return new Map();
  }
  const rows = await db.query<{
    operation_id: string;
    limit_key: string;
    reason: 'rate' | 'concurrency';
    rate_max: number | null;
    rate_interval_ms: number | null;
    concurrency: number | null;
    until: Date | string;
  }>(
    `SELECT t.operation_id, t.limit_key, t.reason, t.rate_max, t.rate_interval_ms, t.concurrency, t.until
     FROM operation_throttle t JOIN assistant_operation o ON o.id = t.operation_id
     WHERE o.organization_id = $1 AND t.operation_id = ANY($2::uuid[]) AND t.until > now()`,
    [scope.organizationId, [...operationIds]],
  );
  return new Map(
    rows.map((row) => [
      row.operation_id,
      {
        limit_key: row.limit_key === '' ? null : row.limit_key,
        limited_by: row.reason,
        rate:
          row.rate_max === null || row.rate_interval_ms === null
            ? null
            : { max: row.rate_max, interval_ms: row.rate_interval_ms },
        concurrency: row.concurrency,
        until: new Date(row.until).toISOString(),
      },
    ]),
  );
}
