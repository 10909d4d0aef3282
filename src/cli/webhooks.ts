/**
 * `opspad webhooks secret --org <name> [--rotate] [--json]`: shows an organization's webhook
 * signing secret, or rotates it. The previous secret keeps signing for
 * OPSPAD_WEBHOOK_ROTATION_GRACE after a rotation, so receivers can switch without a gap.
 *
 * With the embedded database the command runs inside the running service, through the control
 * socket, like `opspad keys` (the caller passes `run`).
 */
import { parseArgs } from 'node:util';
import type { Config } from '../config/env.ts';
import type { WebhookSecretInfo } from '../store/index.ts';
import type { KeyCommand } from './local-control.ts';

const USAGE = 'Usage: opspad webhooks secret --org <name> [--rotate] [--json]';

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

/** Runs the command; returns the exit code (2: usage, 1: no such organization). */
export async function webhooks(
  config: Config,
  args: readonly string[],
  run: (command: KeyCommand) => Promise<unknown>,
): Promise<number> {
  const [verb, ...rest] = args;
  let values: { org?: string; rotate?: boolean; json?: boolean };
  try {
    ({ values } = parseArgs({
      args: rest,
      options: {
        org: { type: 'string' },
        rotate: { type: 'boolean', default: false },
        json: { type: 'boolean', default: false },
      },
      strict: true,
    }));
  } catch (error) {
    process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n${USAGE}\n`);
    return 2;
  }
  const org = values.org?.trim();
  if (verb !== 'secret' || !org) {
    process.stderr.write(`${verb === 'secret' ? 'webhooks secret needs --org <name>.\n' : ''}${USAGE}\n`);
    return 2;
  }
  const rotate = values.rotate === true;
  const info = (await run({
    op: 'webhook_secret',
    org,
    rotate,
    grace_ms: config.OPSPAD_WEBHOOK_ROTATION_GRACE,
  })) as PrintedSecret | null;
  if (info === null) {
    process.stderr.write(`No organization is named "${org}". Create it with: opspad keys create --org ${org}\n`);
    return 1;
  }
  process.stdout.write(values.json ? `${JSON.stringify(info)}\n` : describe(info, rotate));
  return 0;
}
