/**
 * Each organization's storage quota: the items its operations store and the operations it has
 * open (active, paused or awaiting approval). A create or a retry reserves its items before it writes anything, and
 * retention gives them back once it has deleted an operation's item rows.
 *
 * Table: organization_quota (one row per organization that has stored items or overrides, its
 * fair-share weight among them); the organization's key-limit overrides are tenants/key-limits.ts's.
 * Lock order: the conversation → the organization's quota row (held to commit, so the creates
 * of one organization take turns here, and the open-operation count after it sees every create
 * committed before) → the operation rows. Retention holds a finished operation's row, then the
 * quota row: creates lock only active operations, so the two orders never cross.
 * Cost: one upsert of one row, and a count that reads at most the limit's entries of the partial
 * index idx_assistant_operation_org_open; never a count of items.
 */
import type { KeyLimitChange } from '../../domain/limit-overrides.ts';
import type { Database, Queryable } from '../db/db.ts';
import { listKeyLimits, type OrganizationKeyLimit, setKeyLimit } from '../tenants/key-limits.ts';
import { organizationByName } from '../tenants/organization-repo.ts';
import { rethrowAdmissionRefusal } from './admission-refusals.ts';

/** The deployment's quotas (OPSPAD_MAX_STORED_ITEMS, OPSPAD_MAX_OPEN_OPERATIONS). */
export interface QuotaDefaults {
  maxStoredItems: number;
  maxOpenOperations: number;
}

/** The settings' defaults, for callers built without a configuration. */
export const DEFAULT_QUOTA: QuotaDefaults = { maxStoredItems: 10_000_000, maxOpenOperations: 1000 };

/** An organization's quota overrides: null, the deployment's (for the weight, 1). */
export interface QuotaOverrides {
  max_stored_items: number | null;
  max_open_operations: number | null;
  /** Its weight in each handler type's fair share of the fleet (domain/fair-share.ts). */
  fair_share_weight: number | null;
}

/** What `opspad orgs limits` and the admin API change: the overrides and key-limit overrides. */
export interface LimitsChange extends Partial<QuotaOverrides> {
  key_limits?: readonly KeyLimitChange[];
}

/** What an organization uses and may use, as the admin API and the CLI show it. */
export interface OrganizationQuota extends QuotaOverrides {
  organization_id: string;
  stored_items: number;
  open_operations: number;
  limits: { stored_items: number; open_operations: number };
  /** Its own provider limits per handler type and key (tenants/key-limits.ts). */
  key_limits: OrganizationKeyLimit[];
}

/**
 * Reserves `items` stored items and one open operation for a new operation of the organization,
 * or refuses (quota_exceeded) without writing anything the caller's transaction keeps
 * (sql/opspad_reserve_quota.sql). Without `defaults` (a caller of the store itself) the items
 * are counted and nothing is checked.
 */
export async function reserveQuota(
  tx: Queryable,
  organizationId: string,
  items: number,
  defaults: QuotaDefaults | undefined,
): Promise<void> {
  await tx
    .query('SELECT opspad_reserve_quota($1, $2, $3, $4)', [
      organizationId,
      items,
      defaults?.maxStoredItems ?? null,
      defaults?.maxOpenOperations ?? null,
    ])
    .catch(rethrowAdmissionRefusal);
}

/** The organization's open operations, counted up to `limit` (sql/opspad_count_open_operations.sql). */
export async function countOpenOperations(tx: Queryable, organizationId: string, limit: number): Promise<number> {
  const rows = await tx.query<{ n: number }>('SELECT opspad_count_open_operations($1, $2) AS n', [
    organizationId,
    limit,
  ]);
  return rows[0]?.n ?? 0;
}

/** Gives back a finished operation's items once retention has deleted its item rows. */
export async function releaseStoredItems(tx: Queryable, operationId: string): Promise<void> {
  await tx.query(
    `UPDATE organization_quota q SET stored_items = greatest(0, q.stored_items - o.total_items)
     FROM assistant_operation o
     WHERE o.id = $1 AND q.organization_id = o.organization_id`,
    [operationId],
  );
}

/** Sets (a number) or clears (null) an organization's overrides; undefined leaves one as it is. */
export async function setQuotaOverrides(
  tx: Queryable,
  organizationId: string,
  overrides: Partial<QuotaOverrides>,
): Promise<void> {
  await tx.query(
    `INSERT INTO organization_quota (organization_id, max_stored_items, max_open_operations, fair_share_weight)
     VALUES ($1, $3::bigint, $5::int, $7::int)
     ON CONFLICT (organization_id) DO UPDATE SET
       max_stored_items = CASE WHEN $2::boolean THEN excluded.max_stored_items ELSE organization_quota.max_stored_items END,
       max_open_operations = CASE WHEN $4::boolean THEN excluded.max_open_operations ELSE organization_quota.max_open_operations END,
       fair_share_weight = CASE WHEN $6::boolean THEN excluded.fair_share_weight ELSE organization_quota.fair_share_weight END,
       updated_at = now()`,
    [
      organizationId,
      overrides.max_stored_items !== undefined,
      overrides.max_stored_items ?? null,
      overrides.max_open_operations !== undefined,
      overrides.max_open_operations ?? null,
      overrides.fair_share_weight !== undefined,
      overrides.fair_share_weight ?? null,
    ],
  );
}

/** The organization's quota: use, overrides and the limits in force. */
export async function getOrganizationQuota(
  db: Queryable,
  organizationId: string,
  defaults: QuotaDefaults,
): Promise<OrganizationQuota> {
  const rows = await db.query<{
    stored_items: number;
    max_stored_items: number | null;
    max_open_operations: number | null;
    fair_share_weight: number | null;
  }>(
    `SELECT stored_items::float8 AS stored_items, max_stored_items::float8 AS max_stored_items, max_open_operations,
            fair_share_weight
     FROM organization_quota WHERE organization_id = $1`,
    [organizationId],
  );
  const row = rows[0] ?? {
    stored_items: 0,
    max_stored_items: null,
    max_open_operations: null,
    fair_share_weight: null,
  };
  const limits = {
    stored_items: row.max_stored_items ?? defaults.maxStoredItems,
    open_operations: row.max_open_operations ?? defaults.maxOpenOperations,
  };
  return {
    organization_id: organizationId,
    stored_items: row.stored_items,
    open_operations: await countOpenOperations(db, organizationId, limits.open_operations + 1),
    max_stored_items: row.max_stored_items,
    max_open_operations: row.max_open_operations,
    fair_share_weight: row.fair_share_weight,
    limits,
    key_limits: await listKeyLimits(db, organizationId),
  };
}

/**
 * `opspad orgs limits` and the admin API: the named organization's quota after setting the
 * overrides and key-limit overrides given (in one transaction), or null when there is no such
 * organization (nothing is set).
 */
export async function organizationLimits(
  db: Database,
  organizationName: string,
  change: LimitsChange,
  defaults: QuotaDefaults,
): Promise<(OrganizationQuota & { organization: string }) | null> {
  return db.transaction(async (tx) => {
    const organization = await organizationByName(tx, organizationName);
    if (!organization) {
      return null;
    }
    const { key_limits: keyLimits = [], ...overrides } = change;
    if (Object.values(overrides).some((value) => value !== undefined)) {
      await setQuotaOverrides(tx, organization.id, overrides);
    }
    for (const keyLimit of keyLimits) {
      await setKeyLimit(tx, organization.id, keyLimit);
    }
    return { organization: organization.name, ...(await getOrganizationQuota(tx, organization.id, defaults)) };
  });
}
