/**
 * `opspad oauth grants|revoke`: the access operators granted OAuth clients of `/mcp` (one
 * organization each). Beside a running service on the embedded database, through its control
 * socket, as `opspad keys` does.
 */
import type { OAuthGrantSummary } from '../store/index.ts';
import { CommandError, UsageError } from './failure.ts';
import { keyCommand, organizationOption } from './keys.ts';
import { settingsFor } from './settings.ts';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export async function listGrants(options: { org?: string; json: boolean }): Promise<number> {
  const org = options.org === undefined ? undefined : organizationOption(options.org, 'oauth grants');
  const grants = (await keyCommand(settingsFor('oauth'), { op: 'oauth_grants', org })) as OAuthGrantSummary[];
  process.stdout.write(
    options.json
      ? `${JSON.stringify(grants)}\n`
      : `${
          grants
            .map(
              (g) =>
                `${g.grant_id}  ${g.organization}  ${JSON.stringify(g.client_name ?? g.client_id)}  granted by ${g.granted_by} ${g.created_at}${g.revoked_at ? `  revoked ${g.revoked_at}` : ''}`,
            )
            .join('\n') || '(no grants)'
        }\n`,
  );
  return 0;
}

export async function revokeGrant(grant: string, options: { json: boolean }): Promise<number> {
  if (!UUID.test(grant)) {
    throw new UsageError(`"${grant.slice(0, 40)}" is not a grant id`, 'Take one from `opspad oauth grants`');
  }
  const revoked = (await keyCommand(settingsFor('oauth'), { op: 'oauth_revoke', grant })) as boolean;
  if (!revoked) {
    throw new CommandError(`no OAuth grant has the id ${grant}`, 'List the grants with `opspad oauth grants`');
  }
  process.stdout.write(options.json ? `${JSON.stringify({ revoked: true })}\n` : `Revoked grant ${grant}.\n`);
  return 0;
}
