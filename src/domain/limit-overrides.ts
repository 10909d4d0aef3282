/**
 * What an operator may set for one organization beyond its storage quota: its fair-share weight
 * and its own provider limits per handler type and key (organization_key_limit). The bounds and
 * the shape of a change live here once, so the admin API and `opspad orgs limits` (through the
 * control socket) refuse the same input with the same words.
 */
import { z } from 'zod';
import { FAIR_SHARE_WEIGHT } from './fair-share.ts';
import { LIMIT_KEY_MAX_LENGTH } from './key-limits.ts';
import { nameLike } from './names.ts';

/** Bounds of a handler's own `limits` (handlers/registry.ts) and of an organization's override. */
export const KEY_LIMIT_BOUNDS = {
  rateMax: { min: 1, max: 1_000_000 },
  intervalMs: { min: 1, max: 3_600_000 },
  concurrency: { min: 1, max: 100_000 },
  /** A longer key is hashed by the workers (domain/key-limits.ts): no override could name it. */
  keyLength: LIMIT_KEY_MAX_LENGTH,
  operationTypeLength: 100,
} as const;

const whole = (what: string, bounds: { min: number; max: number }) =>
  z
    .number({ error: `must be a whole number${what} from ${bounds.min} to ${bounds.max}` })
    .int('must be a whole number')
    .min(bounds.min, `must be at least ${bounds.min}`)
    .max(bounds.max, `must be at most ${bounds.max}`);

/** An organization's fair-share weight: 1..100, or null for the default (1). */
export const FairShareWeight = whole('', FAIR_SHARE_WEIGHT)
  .nullable()
  .describe("Its weight in each handler type's fair share of the fleet, 1 to 100; null: 1.");

/** A rate: at most `max` items started per `interval_ms`. */
export const KeyRate = z.strictObject({
  max: whole(' of items', KEY_LIMIT_BOUNDS.rateMax),
  interval_ms: whole(' of milliseconds', KEY_LIMIT_BOUNDS.intervalMs),
});

/**
 * One override to set, for (operation_type, key): a field given as a figure sets it, null clears
 * it, absent leaves it. An override left with no figure is removed.
 */
export const KeyLimitChange = z.strictObject({
  operation_type: nameLike(
    z
      .string({ error: 'must be the handler type the override is for' })
      .min(1, 'must not be empty')
      .max(KEY_LIMIT_BOUNDS.operationTypeLength, `must be at most ${KEY_LIMIT_BOUNDS.operationTypeLength} characters`),
  ),
  key: nameLike(
    z
      .string({ error: 'must be a key the handler computes, or null for every key' })
      .min(1, 'must not be empty: send null for every key of the organization')
      .max(KEY_LIMIT_BOUNDS.keyLength, `must be at most ${KEY_LIMIT_BOUNDS.keyLength} characters`),
  )
    .nullable()
    .default(null)
    .describe('The key the override is for; null or absent: every key of the organization for the type.'),
  rate: KeyRate.nullable()
    .optional()
    .describe("{max, interval_ms}: at most max items started per interval; null: the handler's own."),
  concurrency: whole(' of items in flight', KEY_LIMIT_BOUNDS.concurrency)
    .nullable()
    .optional()
    .describe("Items in flight at once for the key; null: the handler's own."),
});
export type KeyLimitChange = z.infer<typeof KeyLimitChange>;

/** Changes at most this many overrides at once (a body stays small). */
export const MAX_KEY_LIMIT_CHANGES = 100;

/** A list of changes, each (operation_type, key) at most once. */
export const KeyLimitChanges = z
  .array(KeyLimitChange)
  .max(MAX_KEY_LIMIT_CHANGES, `must hold at most ${MAX_KEY_LIMIT_CHANGES} changes`)
  .superRefine((changes, ctx) => {
    const seen = new Set<string>();
    for (const [index, change] of changes.entries()) {
      const id = JSON.stringify([change.operation_type, change.key]);
      if (seen.has(id)) {
        ctx.addIssue({
          code: 'custom',
          path: [index],
          message: 'names an operation_type and key given earlier in the list: send each once',
        });
      }
      seen.add(id);
    }
  });
