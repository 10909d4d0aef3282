/**
 * `opspad orgs <command>`: what an operator sets per organization. `limits` shows and sets its
 * quota of stored items and open operations (a platform sells tiers), its fair-share weight and
 * its key-limit overrides; each further setting is a function here and a subcommand of the
 * `orgs` group in program.ts.
 *
 * With the embedded database held by a running service, the command runs inside that service
 * through its control socket, like `opspad keys`.
 */
import { KeyLimitChange } from '../domain/limit-overrides.ts';
import type { OrganizationKeyLimit, OrganizationQuota } from '../store/index.ts';
import { UsageError, unknownOrganization } from './failure.ts';
import { keyCommand, organizationOption } from './keys.ts';
import type { OrgLimitsOptions, QuotaOption, RateOption } from './orgs-limits.ts';
import { settingsFor } from './settings.ts';

type PrintedQuota = OrganizationQuota & { organization: string };

function line(label: string, used: number, limit: number, own: number | null, variable: string): string {
  const source = own === null ? `the default, ${variable}` : 'set for this organization';
  return `${label.padEnd(17)}${used} of ${limit} (${source})`;
}

function keyLimitLine(limit: OrganizationKeyLimit): string {
  const key = limit.key === null ? 'every key' : `key ${JSON.stringify(limit.key)}`;
  const rate = limit.rate ? `${limit.rate.max} per ${limit.rate.interval_ms} ms` : "the handler's own";
  const concurrency = limit.concurrency ?? "the handler's own";
  return `${limit.operation_type}, ${key}: rate ${rate}, concurrency ${concurrency}`;
}

function describe(quota: PrintedQuota): string {
  const weight =
    quota.fair_share_weight === null ? '1 (the default)' : `${quota.fair_share_weight} (set for this organization)`;
  const keyLimits =
    quota.key_limits.length === 0
      ? ["Key limits:      none (the handlers' own)"]
      : quota.key_limits.map((limit, index) => `${index === 0 ? 'Key limits:' : ''}`.padEnd(17) + keyLimitLine(limit));
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
    `Fair share:      weight ${weight}`,
    ...keyLimits,
  ].join('\n')}\n`;
}

/** An override to send: a number sets it, null returns to the default, undefined leaves it. */
const override = (option: QuotaOption | undefined) => (option === 'default' ? null : option);

const rateOverride = (option: RateOption | undefined) =>
  option === undefined ? undefined : option === 'default' ? null : { max: option.max, interval_ms: option.intervalMs };

/** The key-limit change `--handler`, `--key`, `--rate` and `--concurrency` ask for, if any. */
function keyLimitChange(options: OrgLimitsOptions): KeyLimitChange | undefined {
  const changes = options.rate !== undefined || options.concurrency !== undefined;
  if (options.handler === undefined) {
    if (changes || options.key !== undefined) {
      throw new UsageError(
        "--key, --rate and --concurrency override a handler type's limits, and no --handler was given",
        'Add --handler <operation_type>, e.g. `opspad orgs limits --org acme --handler send_sms --rate 10/1s`',
      );
    }
    return undefined;
  }
  if (!changes) {
    throw new UsageError(
      '--handler was given without --rate or --concurrency',
      'Add --rate <max>/<duration> or --concurrency <n> (or `default` to clear one)',
    );
  }
  if (options.key !== undefined && options.key.length === 0) {
    throw new UsageError('--key is empty', 'Leave --key out to override every key of the organization');
  }
  const parsed = KeyLimitChange.safeParse({
    operation_type: options.handler,
    key: options.key ?? null,
    rate: rateOverride(options.rate),
    concurrency: override(options.concurrency),
  });
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const field = issue?.path[0] === 'key' ? '--key' : '--handler';
    throw new UsageError(`${field} ${issue?.message ?? 'is not valid'}`, `Give ${field} as printable text, shorter`);
  }
  return parsed.data;
}

/** Returns the exit code; no such organization is a failure (exit code 1). */
export async function orgLimits(options: OrgLimitsOptions): Promise<number> {
  const config = settingsFor('orgs');
  const org = organizationOption(options.org, 'orgs limits');
  const keyLimit = keyLimitChange(options);
  const quota = (await keyCommand(config, {
    op: 'org_limits',
    org,
    set: {
      max_stored_items: override(options.maxStoredItems),
      max_open_operations: override(options.maxOpenOperations),
      fair_share_weight: override(options.weight),
      ...(keyLimit ? { key_limits: [keyLimit] } : {}),
    },
    defaults: { maxStoredItems: config.OPSPAD_MAX_STORED_ITEMS, maxOpenOperations: config.OPSPAD_MAX_OPEN_OPERATIONS },
  })) as PrintedQuota | null;
  if (quota === null) {
    throw unknownOrganization(org);
  }
  process.stdout.write(options.json ? `${JSON.stringify(quota)}\n` : describe(quota));
  return 0;
}
