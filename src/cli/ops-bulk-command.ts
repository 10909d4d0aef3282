/**
 * `opspad ops pause|resume|cancel|retry-failed --org <name> --type <t> [--status s]
 * [--created-before ISO] [--created-after ISO] [--yes] [--json]`: an operator's action on every
 * operation a filter matches. Only the command lines are here, so that building the program
 * loads nothing more; the work is ops-bulk.ts's, loaded when the command runs.
 */
import { type Command, InvalidArgumentError } from 'commander';
import type { BulkActionName } from '../domain/bulk-action.ts';
import { OPERATION_STATUS, type OperationStatus } from '../domain/operation.ts';
import type { ExitCode } from './program.ts';
import { httpUrl } from './url-option.ts';

export interface OpsBulkOptions {
  org?: string;
  type?: string;
  status?: OperationStatus;
  createdBefore?: string;
  createdAfter?: string;
  yes: boolean;
  json: boolean;
  url?: string;
}

/** The commands, by the admin API's action each runs. */
export const BULK_COMMANDS = {
  pause: { action: 'pause', what: 'Pause every operation that matches' },
  resume: { action: 'resume', what: 'Resume every paused operation that matches' },
  cancel: { action: 'cancel', what: 'Cancel every operation that matches (their items not recorded are abandoned)' },
  'retry-failed': { action: 'retry_failed', what: 'Retry the failed items of every operation that matches' },
} as const satisfies Record<string, { action: BulkActionName; what: string }>;
export type BulkCommand = keyof typeof BULK_COMMANDS;

function status(value: string): OperationStatus {
  const found = OPERATION_STATUS.find((s) => s === value.trim());
  if (!found) {
    throw new InvalidArgumentError(`It must be one of ${OPERATION_STATUS.join(', ')}.`);
  }
  return found;
}

function instant(value: string): string {
  if (!/^\d{4}-\d{2}-\d{2}T/.test(value) || Number.isNaN(Date.parse(value))) {
    throw new InvalidArgumentError('It must be an ISO 8601 time with its offset, e.g. 2026-01-31T12:00:00Z.');
  }
  return value;
}

/** Adds the bulk commands to `ops`. */
export function registerOpsBulk(ops: Command, record: (run: () => Promise<ExitCode>) => Promise<void>): void {
  for (const [name, { what }] of Object.entries(BULK_COMMANDS) as [
    BulkCommand,
    (typeof BULK_COMMANDS)[BulkCommand],
  ][]) {
    ops
      .command(name)
      .usage(
        '--org <name> --type <type> [--status <status>] [--created-before <iso>] [--created-after <iso>] [--yes] [--json]',
      )
      .description(
        `${what}: shows how many first and asks, then runs it on the running opspad's admin API (OPSPAD_ADMIN_USER, OPSPAD_ADMIN_PASSWORD) and follows it to the end.`,
      )
      .option('--org <name>', "the organization's exact name")
      .option('--type <type>', 'the operation type')
      .option('--status <status>', `one of ${OPERATION_STATUS.join(', ')}`, status)
      .option('--created-before <iso>', 'only operations created before this time', instant)
      .option('--created-after <iso>', 'only operations created after this time', instant)
      .option('--yes', 'do not ask (needed without a terminal)', false)
      .option('--json', 'print the finished action as JSON', false)
      .option('--url <url>', 'the opspad API (default OPSPAD_URL, else http://HOST:PORT)', httpUrl)
      .action((options: OpsBulkOptions) => record(async () => (await import('./ops-bulk.ts')).opsBulk(name, options)));
  }
}
