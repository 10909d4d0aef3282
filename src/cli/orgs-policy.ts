/**
 * `opspad orgs policy --org <name> [--approve-above <items>|off] [--json]`: shows or sets an
 * organization's approval policy. Background operations of more items than the threshold are
 * created `awaiting_approval` and lease nothing until a person approves them (the admin API,
 * the operator view, or the user through an MCP client). With the embedded database the command
 * runs inside the running service, through the control socket, like `opspad keys`.
 */
import { type Command, InvalidArgumentError } from 'commander';
import type { ApprovalPolicy } from '../store/index.ts';
import type { ExitCode } from './program.ts';

export interface OrgsPolicyOptions {
  org: string;
  /** A number of items, null to turn approvals off, undefined to show the policy. */
  approveAbove?: number | null;
  json: boolean;
}

/** The largest threshold: items of one operation are counted in a Postgres integer. */
const MAX_THRESHOLD = 2_147_483_647;

function threshold(value: string): number | null {
  if (value === 'off') {
    return null;
  }
  if (!/^\d{1,10}$/.test(value) || Number(value) > MAX_THRESHOLD) {
    throw new InvalidArgumentError(`give a whole number of items (0 to ${MAX_THRESHOLD}), or off.`);
  }
  return Number(value);
}

/** Adds `policy` to the `orgs` command. */
export function registerOrgsPolicy(orgs: Command, record: (run: () => Promise<ExitCode>) => Promise<void>): void {
  orgs
    .command('policy')
    .usage('--org <name> [--approve-above <items>|off] [--json]')
    .description(
      "Show or set an organization's approval policy: background operations of more items wait for a person's approval.",
    )
    .requiredOption('--org <name>', 'the organization')
    .option('--approve-above <items>', 'more items than this wait for approval; off: none wait', threshold)
    .option('--json', 'print the policy as JSON', false)
    .action((options: OrgsPolicyOptions) => record(() => orgsPolicy(options)));
}

function describe(policy: ApprovalPolicy): string {
  const rule =
    policy.approve_above === null
      ? 'no approval: background operations start at once.'
      : `background operations of more than ${policy.approve_above} items wait for a person's approval (POST /admin/approvals/<operation_id>/approve, or the operator view).`;
  return `Organization: ${policy.organization} (${policy.organization_id})\nApprovals:    ${rule}\n`;
}

export async function orgsPolicy(options: OrgsPolicyOptions): Promise<number> {
  const [{ keyCommand, organizationOption }, { settingsFor }, { unknownOrganization }] = await Promise.all([
    import('./keys.ts'),
    import('./settings.ts'),
    import('./failure.ts'),
  ]);
  const org = organizationOption(options.org, 'orgs policy');
  const policy = (await keyCommand(settingsFor('keys'), {
    op: 'approval_policy',
    org,
    ...(options.approveAbove === undefined ? {} : { approve_above: options.approveAbove }),
  })) as ApprovalPolicy | null;
  if (!policy) {
    throw unknownOrganization(org);
  }
  process.stdout.write(options.json ? `${JSON.stringify(policy)}\n` : describe(policy));
  return 0;
}
