/**
 * `opspad keys create|list|revoke`. With the embedded database held by a running service, the
 * command runs inside that service through its control socket (src/cli/local-control.ts).
 */
import type { DatabaseSettings } from '../config/env.ts';
import { hasControlCharacter } from '../domain/names.ts';
import type { ApiKeySummary, CreatedApiKey } from '../store/index.ts';
import { CommandError, UsageError, unknownOrganization } from './failure.ts';
import { type KeyCommand, keyCommandViaLocalControl, ORGANIZATION_NAME_MAX, runKeyCommand } from './local-control.ts';
import { openForCommand } from './local-service.ts';
import type { KeysOptions } from './program.ts';
import { settingsFor } from './settings.ts';

/** Runs a key command through a running service on the embedded database, or directly. */
export async function keyCommand(config: DatabaseSettings, command: KeyCommand): Promise<unknown> {
  const remote = config.DATABASE_URL ? undefined : await keyCommandViaLocalControl(config.OPSPAD_DATA_DIR, command);
  if (remote) {
    return remote.result;
  }
  const db = await openForCommand(config);
  try {
    return await runKeyCommand(db, command);
  } finally {
    await db.close();
  }
}

/** The organization named by --org, trimmed; blank or too long is a usage error. */
export function organizationOption(org: string, command: string): string {
  const name = org.trim();
  if (!name) {
    throw new UsageError('--org is blank', `Give the organization's name, e.g. \`opspad ${command} --org acme\``);
  }
  if (hasControlCharacter(name)) {
    throw new UsageError(
      '--org contains a control character (a line break, a tab, …), which names may not hold',
      "Give the organization's name as printable text",
    );
  }
  if (name.length > ORGANIZATION_NAME_MAX) {
    throw new UsageError(
      `--org is ${name.length} characters long, over the ${ORGANIZATION_NAME_MAX} an organization's name may have`,
      'Give a shorter name',
    );
  }
  return name;
}

export async function createKey(options: KeysOptions): Promise<number> {
  const org = organizationOption(options.org, 'keys create');
  const created = (await keyCommand(settingsFor('keys'), { op: 'create', org })) as CreatedApiKey;
  process.stdout.write(
    options.json
      ? `${JSON.stringify({ organization_id: created.organization_id, api_key: created.api_key })}\n`
      : `Organization: ${created.organization_id}\nAPI key:      ${created.api_key}\nKeep the key: it is shown only now.\n`,
  );
  return 0;
}

export async function listKeys(options: KeysOptions): Promise<number> {
  const org = organizationOption(options.org, 'keys list');
  const listed = (await keyCommand(settingsFor('keys'), { op: 'list', org })) as ApiKeySummary[];
  // An organization comes into being with its first key, and keys are never deleted (revoked
  // ones are listed): no key means no such organization.
  if (listed.length === 0) {
    throw unknownOrganization(org);
  }
  process.stdout.write(
    options.json
      ? `${JSON.stringify(listed)}\n`
      : `${listed.map((k) => `${k.key_id}  ${k.key_prefix}…  created ${k.created_at}${k.revoked_at ? `  revoked ${k.revoked_at}` : ''}`).join('\n')}\n`,
  );
  return 0;
}

export async function revokeKey(key: string, options: { json: boolean }): Promise<number> {
  const revoked = (await keyCommand(settingsFor('keys'), { op: 'revoke', key })) as ApiKeySummary | null;
  if (!revoked) {
    throw new CommandError(
      `no API key matches "${key.slice(0, 12)}"`,
      'Give a key id from `opspad keys list --org <name>`, or the whole key',
    );
  }
  process.stdout.write(
    options.json
      ? `${JSON.stringify(revoked)}\n`
      : `Revoked ${revoked.key_id} (${revoked.key_prefix}…) of ${revoked.organization}.\n`,
  );
  return 0;
}
