/**
 * `opspad orgs <command>`: what an operator sets per organization. `limits` shows and sets its
 * quota of stored items and open operations (a platform sells tiers); each further setting is a
 * function here and a subcommand of the `orgs` group in program.ts.
 *
 * With the embedded database held by a running service, the command runs inside that service
 * through its control socket, like `opspad keys`.
 */
import type { OrganizationQuota } from '../store/index.ts';
import { unknownOrganization } from './failure.ts';
import { keyCommand, organizationOption } from './keys.ts';
import type { OrgLimitsOptions, QuotaOption } from './orgs-limits.ts';
import { settingsFor } from './settings.ts';

type PrintedQuota = OrganizationQuota & { organization: string };

function line(label: string, used: number, limit: number, own: number | null, variable: string): string {
  const source = own === null ? `the default, ${variable}` : 'set for this organization';
  return `${label.padEnd(17)}${used} of ${limit} (${source})`;
}

function describe(quota: PrintedQuota): string {
  return `${[
    `Organization:    ${quota.organization} (${quota.organization_id})`,
    line(
      'Stored items:',
      quota.stored_items,
      quota.limits.stored_items,
      quota.max_stored_items,
      'OPSPAD_MAX_STORED_ITEMS',
    ),
    line(
      'Open operations:',
      quota.open_operations,
      quota.limits.open_operations,
      quota.max_open_operations,
      'OPSPAD_MAX_OPEN_OPERATIONS',
    ),
  ].join('\n')}\n`;
}

/** An override to send: a number sets it, null returns to the default, undefined leaves it. */
const override = (option: QuotaOption | undefined) => (option === 'default' ? null : option);

/** Returns the exit code; no such organization is a failure (exit code 1). */
export async function orgLimits(options: OrgLimitsOptions): Promise<number> {
  const config = settingsFor('orgs');
  const org = organizationOption(options.org, 'orgs limits');
  const quota = (await keyCommand(config, {
    op: 'org_limits',
    org,
    set: {
      max_stored_items: override(options.maxStoredItems),
      max_open_operations: override(options.maxOpenOperations),
    },
    defaults: { maxStoredItems: config.OPSPAD_MAX_STORED_ITEMS, maxOpenOperations: config.OPSPAD_MAX_OPEN_OPERATIONS },
  })) as PrintedQuota | null;
  if (quota === null) {
    throw unknownOrganization(org);
  }
  process.stdout.write(options.json ? `${JSON.stringify(quota)}\n` : describe(quota));
  return 0;
}
