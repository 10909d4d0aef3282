/**
 * `/admin/organizations/:name/limits`: an organization's quota — its stored items and open
 * operations, the limits in force, and the overrides an operator set for it (a platform that
 * sells tiers sets them per customer). JSON, behind the operator's basic auth like the operator
 * view; `opspad orgs limits` does the same from a shell.
 *
 * GET reads; PUT sets the overrides given (a number) or clears them (null: the deployment's
 * OPSPAD_MAX_STORED_ITEMS, OPSPAD_MAX_OPEN_OPERATIONS; a fair-share weight of 1), and the
 * key-limit overrides listed in `key_limits` (one body, one transaction: the weight and the
 * overrides change together or not at all). A PUT must be `application/json`, which a
 * browser sends cross-site only after a CORS preflight nobody answers, so a forged page cannot
 * change a quota with the operator's credentials. Read-only mode refuses every PUT.
 */
import express, { Router } from 'express';
import { z } from 'zod';
import { AppError } from '../../domain/errors.ts';
import { FairShareWeight, KEY_LIMIT_BOUNDS, KeyLimitChanges } from '../../domain/limit-overrides.ts';
import { nameLike } from '../../domain/names.ts';
import { parseOrThrow } from '../../domain/validation.ts';
import { type Database, organizationLimits, type QuotaDefaults } from '../../store/index.ts';

export const ADMIN_LIMITS_PATH = '/admin/organizations';

export const LimitsParams = z.object({ name: nameLike(z.string().min(1).max(200, 'must be at most 200 characters')) });

/** The largest override: a quota is an integer column, and beyond this it bounds nothing. */
const MAX_OVERRIDE = 2_147_483_647;
const override = z
  .number({ error: 'must be a whole number, or null for the deployment default' })
  .int('must be a whole number')
  .min(1, 'must be at least 1')
  .max(MAX_OVERRIDE, `must be at most ${MAX_OVERRIDE}`)
  .nullable()
  .optional();

const count = z.number().int().min(0);
/** What GET and PUT answer: the organization's use, its own limits and the limits in force. */
export const OrganizationLimits = z.object({
  organization: z.string(),
  organization_id: z.uuid(),
  stored_items: count.describe('Items its operations hold until retention deletes them.'),
  open_operations: count.describe('Active or paused operations.'),
  max_stored_items: count.nullable().describe("Its own limit; null: the deployment's OPSPAD_MAX_STORED_ITEMS."),
  max_open_operations: count.nullable().describe("Its own limit; null: the deployment's OPSPAD_MAX_OPEN_OPERATIONS."),
  limits: z.object({ stored_items: count, open_operations: count }).describe('The limits in force.'),
  fair_share_weight: count
    .nullable()
    .describe("Its own weight in each handler type's fair share of the fleet (1 to 100); null: 1."),
  key_limits: z
    .array(
      z.object({
        operation_type: z.string(),
        key: z.string().nullable().describe('null: every key of its operations of the type.'),
        rate: z
          .object({ max: count, interval_ms: count })
          .nullable()
          .describe("At most max items started per interval_ms; null: the handler's own."),
        concurrency: count.nullable().describe("Items in flight at once per key; null: the handler's own."),
      }),
    )
    .describe("Its own provider limits, overriding the handler's declared limits for its keys."),
});

/**
 * The overrides a PUT sets: a number sets one, null clears it, absent leaves it. `key_limits`
 * lists the key-limit overrides to change, each by (operation_type, key); the ones not listed stay.
 */
export const LimitsBody = z.strictObject({
  max_stored_items: override,
  max_open_operations: override,
  fair_share_weight: FairShareWeight.optional(),
  key_limits: KeyLimitChanges.optional().describe(
    `Key-limit overrides to set or clear (at most 100): rate.max ${KEY_LIMIT_BOUNDS.rateMax.min}..${KEY_LIMIT_BOUNDS.rateMax.max}, rate.interval_ms ${KEY_LIMIT_BOUNDS.intervalMs.min}..${KEY_LIMIT_BOUNDS.intervalMs.max}, concurrency ${KEY_LIMIT_BOUNDS.concurrency.min}..${KEY_LIMIT_BOUNDS.concurrency.max}; an override left with neither is removed.`,
  ),
});

export interface AdminLimitsDeps {
  db: Database;
  quota: QuotaDefaults;
  readOnly: boolean;
}

function unknownOrganization(name: string): AppError {
  return new AppError(
    'not_found',
    `There is no organization named "${name}". Organizations come into being with their first key (opspad keys create --org <name>).`,
    { organization: name },
  );
}

export function adminLimitsRouter(deps: AdminLimitsDeps): Router {
  const router = Router();

  router.get('/:name/limits', async (req, res) => {
    const { name } = parseOrThrow(LimitsParams, req.params, 'path');
    const quota = await organizationLimits(deps.db, name, {}, deps.quota);
    if (!quota) {
      throw unknownOrganization(name);
    }
    res.json(quota);
  });

  router.put('/:name/limits', express.json({ limit: '64kb', strict: true, type: () => true }), async (req, res) => {
    if (deps.readOnly) {
      throw new AppError('forbidden', 'The operator surfaces are read-only (OPSPAD_ADMIN_READONLY=true).', {
        read_only: true,
      });
    }
    if (!req.is('application/json')) {
      throw new AppError('validation_failed', 'Invalid input: Content-Type: send the limits as application/json.', {
        issues: [{ field: 'Content-Type', message: 'must be application/json' }],
        total_issues: 1,
      });
    }
    const { name } = parseOrThrow(LimitsParams, req.params, 'path');
    const body = parseOrThrow(LimitsBody, req.body ?? {}, 'body');
    const quota = await organizationLimits(deps.db, name, body, deps.quota);
    if (!quota) {
      throw unknownOrganization(name);
    }
    res.json(quota);
  });

  return router;
}
