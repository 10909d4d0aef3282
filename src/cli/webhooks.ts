/**
 * `opspad webhooks secret --org <name> [--rotate] [--json]`: shows an organization's webhook
 * signing secret, or rotates it. The previous secret keeps signing for
 * OPSPAD_WEBHOOK_ROTATION_GRACE after a rotation, so receivers can switch without a gap.
 *
 * With the embedded database the command runs inside the running service, through the control
 * socket, like `opspad keys`.
 */
import type { WebhookSecretInfo } from '../store/index.ts';
import { unknownOrganization } from './failure.ts';
import { keyCommand, organizationOption } from './keys.ts';
import type { WebhookSecretOptions } from './program.ts';
import { settingsFor } from './settings.ts';

/** Dates arrive as strings through the control socket. */
type PrintedSecret = Omit<WebhookSecretInfo, 'created_at' | 'previous'> & {
  created_at: Date | string;
  previous: { created_at: Date | string; expires_at: Date | string }[];
};

const iso = (value: Date | string) => new Date(value).toISOString();

function describe(info: PrintedSecret, rotated: boolean): string {
  const lines = [`Organization:   ${info.organization} (${info.organization_id})`, `Webhook secret: ${info.secret}`];
  for (const previous of info.previous) {
    lines.push(`Also signing:   the secret created ${iso(previous.created_at)}, until ${iso(previous.expires_at)}`);
  }
  if (rotated) {
    lines.push(
      'Rotated: requests carry a signature for each secret above; move receivers to the new one before the old stops.',
    );
  }
  lines.push(
    'Receivers verify requests with it, e.g. new Webhook(secret).verify(body, headers) (npm standardwebhooks).',
  );
  return `${lines.join('\n')}\n`;
}

/** Returns the exit code; no such organization is a failure (exit code 1). */
export async function webhookSecret(options: WebhookSecretOptions): Promise<number> {
  const config = settingsFor('webhooks');
  const org = organizationOption(options.org, 'webhooks secret');
  const info = (await keyCommand(config, {
    op: 'webhook_secret',
    org,
    rotate: options.rotate,
    grace_ms: config.OPSPAD_WEBHOOK_ROTATION_GRACE,
  })) as PrintedSecret | null;
  if (info === null) {
    throw unknownOrganization(org);
  }
  process.stdout.write(options.json ? `${JSON.stringify(info)}\n` : describe(info, options.rotate));
  return 0;
}
