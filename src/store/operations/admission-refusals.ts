/**
 * The answers to the refusals the admission's SQL functions raise: the organization's quota
 * (sql/opspad_reserve_quota.sql, OPS02) and the background limit
 * (sql/opspad_assert_background_capacity.sql, OPS03). Each raises with its figures as JSON in
 * DETAIL, and the statement that raised wrote nothing; the caller's transaction rolls back on
 * the error thrown here.
 */
import { AppError } from '../../domain/errors.ts';
import { BACKGROUND_LIMIT_REFUSED, QUOTA_REFUSED, sqlStateOf } from '../db/pg-errors.ts';

const VARIABLES = { stored_items: 'OPSPAD_MAX_STORED_ITEMS', open_operations: 'OPSPAD_MAX_OPEN_OPERATIONS' } as const;

function quotaExceeded(
  quota: keyof typeof VARIABLES,
  used: number,
  requested: number,
  limit: number,
  overridden: boolean,
): AppError {
  const setting = VARIABLES[quota];
  const source = overridden ? `set for this organization with opspad orgs limits; the default is ${setting}` : setting;
  const what =
    quota === 'stored_items'
      ? `stores ${used} items, and ${requested} more would pass its quota of ${limit} (${source})`
      : `has ${used} open operations (active, paused or awaiting approval), the most its quota allows (${limit}, ${source})`;
  const remedy =
    quota === 'stored_items'
      ? 'Complete or cancel operations: retention (OPSPAD_RETENTION) then deletes their items and frees the quota'
      : 'Complete or cancel an open operation first';
  return new AppError(
    'quota_exceeded',
    `This organization ${what}; nothing was created. ${remedy}, or ask the operator for a larger quota.`,
    { quota, used, requested, limit, setting, overridden },
  );
}

/** Throws the answer to an admission refusal; anything else, as it is. */
export function rethrowAdmissionRefusal(error: unknown): never {
  const code = sqlStateOf(error);
  if (code === QUOTA_REFUSED) {
    const { quota, used, requested, limit, overridden } = refusalFigures(error) as {
      quota: keyof typeof VARIABLES;
      used: number;
      requested: number;
      limit: number;
      overridden: boolean;
    };
    throw quotaExceeded(quota, used, requested, limit, overridden);
  }
  if (code === BACKGROUND_LIMIT_REFUSED) {
    const { active, limit } = refusalFigures(error) as { active: number; limit: number };
    throw new AppError(
      'too_many_active_operations',
      `This organization already has ${active} active background operations, the most allowed (OPSPAD_MAX_ACTIVE_BACKGROUND = ${limit}). Wait for one to finish, or pause or cancel one.`,
      { active, limit },
    );
  }
  throw error;
}

function refusalFigures(error: unknown): Record<string, unknown> {
  return JSON.parse(String((error as { detail?: unknown }).detail)) as Record<string, unknown>;
}
