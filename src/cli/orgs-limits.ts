/**
 * `opspad orgs limits --org <name> [--max-stored-items <n|default>] [--max-open-operations
 * <n|default>] [--json]`: the `orgs` subcommand that shows and sets an organization's quota.
 * Only the command line is here, so that building the program loads nothing more; the work is
 * orgs.ts's, loaded when the command runs.
 */
import { type Command, InvalidArgumentError } from 'commander';
import type { ExitCode } from './program.ts';

/** A quota override: a number, or `default` for the deployment's (commander keeps no null). */
export type QuotaOption = number | 'default';

export interface OrgLimitsOptions {
  org: string;
  maxStoredItems?: QuotaOption;
  maxOpenOperations?: QuotaOption;
  json: boolean;
}

/** The largest override: a quota is counted in a Postgres integer. */
const MAX_QUOTA = 2_147_483_647;

/** `--max-…`: a whole number of 1 or more, or `default`. */
function quotaOption(value: string): QuotaOption {
  const trimmed = value.trim();
  if (trimmed === 'default') {
    return 'default';
  }
  if (!/^\d{1,10}$/.test(trimmed) || Number(trimmed) < 1 || Number(trimmed) > MAX_QUOTA) {
    throw new InvalidArgumentError(`give a whole number from 1 to ${MAX_QUOTA}, or default.`);
  }
  return Number(trimmed);
}

/** Adds `limits` to the `orgs` command. */
export function registerOrgsLimits(orgs: Command, record: (run: () => Promise<ExitCode>) => Promise<void>): void {
  orgs
    .command('limits')
    .usage('--org <name> [--max-stored-items <n|default>] [--max-open-operations <n|default>] [--json]')
    .description(
      "Show an organization's quota (stored items, open operations) and its use, or set its own limits: `default` returns to OPSPAD_MAX_STORED_ITEMS, OPSPAD_MAX_OPEN_OPERATIONS.",
    )
    .requiredOption('--org <name>', 'the organization')
    .option('--max-stored-items <n>', 'items its operations may hold, or `default`', quotaOption)
    .option('--max-open-operations <n>', 'open operations it may have, or `default`', quotaOption)
    .option('--json', 'print as JSON', false)
    .action((options: OrgLimitsOptions) => record(async () => (await import('./orgs.ts')).orgLimits(options)));
}
