/**
 * An organization's own provider limits per handler type and key (a platform that sells tiers
 * sets them per customer), overriding the figures the handler declares. A row's `limit_key` ''
 * stands for every key of the organization's operations of the type; any other value for that
 * key alone. The workers read the override in force for one key ({@link keyLimitOverride});
 * the operator surfaces list and change them.
 *
 * Table: organization_key_limit (PK organization, type, key). Every statement is scoped by the
 * organization; writes lock only the row they change.
 */
import type { KeyLimits } from '../../domain/key-limits.ts';
import type { KeyLimitChange } from '../../domain/limit-overrides.ts';
import type { Queryable } from '../db/db.ts';

/** The key that stands for every key of the organization's operations of a type. */
const EVERY_KEY = '';

/** An override as the operator surfaces show it. */
export interface OrganizationKeyLimit {
  operation_type: string;
  /** null: every key of the organization's operations of the type. */
  key: string | null;
  rate: { max: number; interval_ms: number } | null;
  concurrency: number | null;
}

interface KeyLimitRow {
  operation_type: string;
  limit_key: string;
  rate_max: number | null;
  rate_interval_ms: number | null;
  concurrency: number | null;
}

/** The organization's overrides, by type then key (every key first). */
export async function listKeyLimits(db: Queryable, organizationId: string): Promise<OrganizationKeyLimit[]> {
  const rows = await db.query<KeyLimitRow>(
    `SELECT operation_type, limit_key, rate_max, rate_interval_ms, concurrency
     FROM organization_key_limit WHERE organization_id = $1
     ORDER BY operation_type, limit_key`,
    [organizationId],
  );
  return rows.map((row) => ({
    operation_type: row.operation_type,
    key: row.limit_key === EVERY_KEY ? null : row.limit_key,
    rate:
      row.rate_max !== null && row.rate_interval_ms !== null
        ? { max: row.rate_max, interval_ms: row.rate_interval_ms }
        : null,
    concurrency: row.concurrency,
  }));
}

/**
 * Sets (a figure) or clears (null) the fields of one override, leaving those absent as they are;
 * an override left with no figure is deleted.
 */
export async function setKeyLimit(tx: Queryable, organizationId: string, change: KeyLimitChange): Promise<void> {
  const key = change.key ?? EVERY_KEY;
  await tx.query(
    `INSERT INTO organization_key_limit (organization_id, operation_type, limit_key, rate_max, rate_interval_ms, concurrency)
     VALUES ($1, $2, $3, $5::int, $6::int, $8::int)
     ON CONFLICT (organization_id, operation_type, limit_key) DO UPDATE SET
       rate_max = CASE WHEN $4::boolean THEN excluded.rate_max ELSE organization_key_limit.rate_max END,
       rate_interval_ms = CASE WHEN $4::boolean THEN excluded.rate_interval_ms ELSE organization_key_limit.rate_interval_ms END,
       concurrency = CASE WHEN $7::boolean THEN excluded.concurrency ELSE organization_key_limit.concurrency END,
       updated_at = now()`,
    [
      organizationId,
      change.operation_type,
      key,
      change.rate !== undefined,
      change.rate?.max ?? null,
      change.rate?.interval_ms ?? null,
      change.concurrency !== undefined,
      change.concurrency ?? null,
    ],
  );
  await tx.query(
    `DELETE FROM organization_key_limit
     WHERE organization_id = $1 AND operation_type = $2 AND limit_key = $3
       AND rate_max IS NULL AND concurrency IS NULL`,
    [organizationId, change.operation_type, key],
  );
}

/**
 * The override in force for `limitKey` of the organization's operations of a type: the key's own
 * row, else the every-key row, merged figure by figure (a figure the key's row leaves null falls
 * through to the every-key row's, then to the handler's own — the caller's). Undefined when
 * neither row sets anything: the figures domain/key-limits.ts's `withOverride` lays over the
 * handler's. One index lookup of at most two rows.
 */
export async function keyLimitOverride(
  db: Queryable,
  organizationId: string,
  operationType: string,
  limitKey: string,
): Promise<KeyLimits | undefined> {
  const rows = await db.query<KeyLimitRow>(
    `SELECT operation_type, limit_key, rate_max, rate_interval_ms, concurrency
     FROM organization_key_limit
     WHERE organization_id = $1 AND operation_type = $2 AND limit_key IN ($3, '')
     ORDER BY limit_key = '' ASC`,
    [organizationId, operationType, limitKey],
  );
  const override: KeyLimits = {};
  // The key's own row first: a figure it sets wins over the every-key row's.
  for (const row of rows) {
    if (override.rate === undefined && row.rate_max !== null && row.rate_interval_ms !== null) {
      override.rate = { max: row.rate_max, intervalMs: row.rate_interval_ms };
    }
    if (override.concurrency === undefined && row.concurrency !== null) {
      override.concurrency = row.concurrency;
    }
  }
  return override.rate === undefined && override.concurrency === undefined ? undefined : override;
}
