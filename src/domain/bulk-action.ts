/**
 * An operator's action on every operation a filter matches: which actions there are, the filter
 * as the admin API, the CLI and the operator view spell it, and what an action does to one
 * operation in a given status. The runner (tools/bulk-action-runner.ts) applies each operation
 * through the operation tool, as one operator click would; this module only says which ones it
 * skips up front, so the skip can be named in the action's record.
 */
import { z } from 'zod';
import { OPERATION_STATUS, type OperationStatus } from './operation.ts';
import { transition } from './operation-lifecycle.ts';

export const BULK_ACTIONS = ['pause', 'resume', 'cancel', 'retry_failed'] as const;
export type BulkActionName = (typeof BULK_ACTIONS)[number];

export const BULK_ACTION_STATUS = ['running', 'done'] as const;
export type BulkActionStatus = (typeof BULK_ACTION_STATUS)[number];

/** A target's state: `applying` while a server runs the tool on it. */
export const BULK_TARGET_STATE = ['pending', 'applying', 'applied', 'skipped'] as const;
export type BulkTargetState = (typeof BULK_TARGET_STATE)[number];

const text = (max: number, what: string) =>
  z
    .string({ error: `must be ${what}` })
    .trim()
    .min(1, `must be ${what}, or left out`)
    .max(max, `must be at most ${max} characters`);

/** An ISO time's offset hours (`+05:30` → 5), 0 for `Z`. */
const offsetHours = (iso: string) => Number(/[+-](\d{2}):\d{2}$/.exec(iso)?.[1] ?? 0);

/**
 * An instant an operator filters operations' creation by (the view's list, a bulk action). Zod's
 * ISO times take year 0000 and offsets up to ±23:59, which Postgres's timestamptz refuses (an
 * error of the statement, not of the input): those are refused here, naming the field.
 */
export const instant = (what: string) =>
  z.iso
    .datetime({ offset: true, error: `must be an ISO 8601 time with its offset (e.g. 2026-01-31T12:00:00Z), ${what}` })
    .refine((iso) => !iso.startsWith('0000-'), 'has year 0000, which does not exist: give a year from 0001 to 9999')
    .refine(
      (iso) => offsetHours(iso) < 16,
      'has an offset of 16 hours or more: give an offset from -15:59 to +15:59 (e.g. Z or +01:00)',
    )
    .optional();

/**
 * The filter of a bulk action, as stored with it and answered back. At least one field: an
 * action on every operation of every organization is not something to do by accident.
 */
export const BulkFilter = z
  .strictObject({
    org: text(200, "an organization's exact name").optional(),
    type: text(64, 'an operation type').optional(),
    status: z.enum(OPERATION_STATUS, { error: `must be one of ${OPERATION_STATUS.join(', ')}` }).optional(),
    created_before: instant('operations created before it'),
    created_after: instant('operations created after it'),
    q: text(512, 'search text (an operation, item, conversation or organization id, or a name)').optional(),
  })
  .refine((f) => Object.values(f).some((v) => v !== undefined), {
    message: 'give at least one of org, type, status, created_before, created_after, q',
  })
  .refine(
    (f) => !(f.created_before && f.created_after && Date.parse(f.created_after) >= Date.parse(f.created_before)),
    {
      message: 'must be earlier than created_before, or nothing matches',
      path: ['created_after'],
    },
  );
export type BulkFilter = z.output<typeof BulkFilter>;

/** The skip a bulk action records without calling the tool, or null when the tool decides. */
export function skipBeforeApplying(action: BulkActionName, status: OperationStatus): string | null {
  if (action === 'retry_failed') {
    return null;
  }
  const rule = transition(action, status);
  if (rule.kind === 'already') {
    return `it is already ${status}`;
  }
  if (rule.kind === 'refused') {
    return `it is ${status}: it cannot be ${rule.verb}`;
  }
  return null;
}
