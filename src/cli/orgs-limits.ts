/**
 * `opspad orgs limits --org <name> [--max-stored-items <n|default>] [--max-open-operations
 * <n|default>] [--weight <1..100|default>] [--handler <type> [--key <key>] [--rate
 * <max>/<duration>|default] [--concurrency <n|default>]] [--json]`: the `orgs` subcommand that
 * shows and sets an organization's quota, fair-share weight and key-limit overrides. Only the
 * command line is here, so that building the program loads nothing more; the work is orgs.ts's,
 * loaded when the command runs.
 */
import { type Command, InvalidArgumentError } from 'commander';
import { perWindow } from '../config/parsers.ts';
import { FAIR_SHARE_WEIGHT } from '../domain/fair-share.ts';
import { KEY_LIMIT_BOUNDS } from '../domain/limit-overrides.ts';
import type { ExitCode } from './program.ts';

/** A quota override: a number, or `default` for the deployment's (commander keeps no null). */
export type QuotaOption = number | 'default';

/** A rate override: at most `max` items per `intervalMs`, or `default` for the handler's own. */
export type RateOption = { max: number; intervalMs: number } | 'default';

export interface OrgLimitsOptions {
  org: string;
  maxStoredItems?: QuotaOption;
  maxOpenOperations?: QuotaOption;
  weight?: QuotaOption;
  handler?: string;
  key?: string;
  rate?: RateOption;
  concurrency?: QuotaOption;
  json: boolean;
}

/** The largest override: a quota is counted in a Postgres integer. */
const MAX_QUOTA = 2_147_483_647;

/** A whole number from `min` to `max`, or `default`. */
const wholeOrDefault =
  (min: number, max: number) =>
  (value: string): QuotaOption => {
    const trimmed = value.trim();
    if (trimmed === 'default') {
      return 'default';
    }
    if (!/^\d{1,10}$/.test(trimmed) || Number(trimmed) < min || Number(trimmed) > max) {
      throw new InvalidArgumentError(`give a whole number from ${min} to ${max}, or default.`);
    }
    return Number(trimmed);
  };

/** `--rate`: `<max>/<duration>` (`10/1s`, `600/1m`, `5/500ms`), or `default`. */
function rateOption(value: string): RateOption {
  if (value.trim() === 'default') {
    return 'default';
  }
  const parsed = perWindow.safeParse(value);
  const { rateMax, intervalMs } = KEY_LIMIT_BOUNDS;
  const hint = `give <max>/<duration> such as 10/1s, 600/1m or 5/500ms (max ${rateMax.min} to ${rateMax.max}, duration 1ms to 1h), or default.`;
  if (
    !parsed.success ||
    parsed.data.max > rateMax.max ||
    parsed.data.windowMs < intervalMs.min ||
    parsed.data.windowMs > intervalMs.max
  ) {
    throw new InvalidArgumentError(hint);
  }
  return { max: parsed.data.max, intervalMs: parsed.data.windowMs };
}

/** Adds `limits` to the `orgs` command. */
export function registerOrgsLimits(orgs: Command, record: (run: () => Promise<ExitCode>) => Promise<void>): void {
  const { concurrency } = KEY_LIMIT_BOUNDS;
  orgs
    .command('limits')
    .usage(
      '--org <name> [--max-stored-items <n|default>] [--max-open-operations <n|default>] [--weight <1..100|default>] [--handler <type> [--key <key>] [--rate <max>/<duration>|default] [--concurrency <n|default>]] [--json]',
    )
    .description(
      "Show an organization's quota (stored items, open operations) and its use, its fair-share weight and its key-limit overrides, or set them: `default` returns to OPSPAD_MAX_STORED_ITEMS, OPSPAD_MAX_OPEN_OPERATIONS, a weight of 1, or the handler's own limit. An override left with neither rate nor concurrency is removed.",
    )
    .requiredOption('--org <name>', 'the organization')
    .option('--max-stored-items <n>', 'items its operations may hold, or `default`', wholeOrDefault(1, MAX_QUOTA))
    .option('--max-open-operations <n>', 'open operations it may have, or `default`', wholeOrDefault(1, MAX_QUOTA))
    .option(
      '--weight <n>',
      "its weight in each handler type's fair share, 1 to 100, or `default` (1)",
      wholeOrDefault(FAIR_SHARE_WEIGHT.min, FAIR_SHARE_WEIGHT.max),
    )
    .option('--handler <type>', 'the handler type (operation_type) whose limits --rate and --concurrency override')
    .option('--key <key>', 'the one key they override (default: every key of the organization)')
    .option('--rate <max/duration>', 'items started per interval, e.g. 10/1s, or `default`', rateOption)
    .option(
      '--concurrency <n>',
      `items in flight at once per key, ${concurrency.min} to ${concurrency.max}, or \`default\``,
      wholeOrDefault(concurrency.min, concurrency.max),
    )
    .option('--json', 'print as JSON', false)
    .action((options: OrgLimitsOptions) => record(async () => (await import('./orgs.ts')).orgLimits(options)));
}
