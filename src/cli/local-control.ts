/**
 * The embedded PGlite database can be open in one process only. While `opspad start` holds it,
 * other `opspad` commands on the same machine reach it through a Unix socket in the data folder
 * (`<OPSPAD_DATA_DIR>/control.sock`), so `opspad keys create` works beside a running service.
 * Access is the file system's: whoever may read the data folder may already read the database.
 */
import { chmodSync, existsSync, rmSync, statSync } from 'node:fs';
import { createServer, request, type Server } from 'node:http';
import { join } from 'node:path';
import { z } from 'zod';
import { FairShareWeight, KeyLimitChanges } from '../domain/limit-overrides.ts';
import { nameLike } from '../domain/names.ts';
import {
  createApiKey,
  type Database,
  getApprovalPolicy,
  listApiKeys,
  listOAuthGrants,
  organizationLimits,
  PRIVATE_FILE_MODE,
  revokeApiKey,
  revokeOAuthGrant,
  setApprovalPolicy,
  webhookSecretOf,
} from '../store/index.ts';
import { ProblemError } from './failure.ts';

export function controlSocketPath(dataDir: string): string {
  return join(dataDir, 'control.sock');
}

/** The longest organization name the commands take (--org). */
export const ORGANIZATION_NAME_MAX = 200;
const organizationName = nameLike(z.string().min(1).max(ORGANIZATION_NAME_MAX));
const quotaValue = z.number().int().min(1).max(2_147_483_647).nullable().optional();

/** The key and webhook-secret commands a running service runs for other `opspad` processes. */
export const KeyCommand = z.discriminatedUnion('op', [
  z.strictObject({ op: z.literal('create'), org: organizationName }),
  z.strictObject({ op: z.literal('revoke'), key: z.string().min(1).max(200) }),
  z.strictObject({ op: z.literal('list'), org: organizationName }),
  z.strictObject({ op: z.literal('oauth_grants'), org: organizationName.optional() }),
  z.strictObject({ op: z.literal('oauth_revoke'), grant: z.uuid() }),
  z.strictObject({
    op: z.literal('org_limits'),
    org: organizationName,
    set: z.strictObject({
      max_stored_items: quotaValue,
      max_open_operations: quotaValue,
      fair_share_weight: FairShareWeight.optional(),
      key_limits: KeyLimitChanges.optional(),
    }),
    defaults: z.strictObject({ maxStoredItems: z.number().int().min(1), maxOpenOperations: z.number().int().min(1) }),
  }),
  z.strictObject({
    op: z.literal('approval_policy'),
    org: organizationName,
    /** Absent: show the policy; null: no approvals. */
    approve_above: z.number().int().min(0).max(2_147_483_647).nullable().optional(),
  }),
  z.strictObject({
    op: z.literal('webhook_secret'),
    org: organizationName,
    rotate: z.boolean(),
    grace_ms: z
      .number()
      .int()
      .min(0)
      .max(366 * 24 * 3600 * 1000),
  }),
]);
export type KeyCommand = z.infer<typeof KeyCommand>;

/** Runs a key command against the database. */
export async function runKeyCommand(db: Database, command: KeyCommand): Promise<unknown> {
  switch (command.op) {
    case 'create':
      return createApiKey(db, command.org);
    case 'revoke':
      return revokeApiKey(db, command.key);
    case 'list':
      return listApiKeys(db, command.org);
    case 'webhook_secret':
      return webhookSecretOf(db, command.org, { rotate: command.rotate, graceMs: command.grace_ms });
    case 'oauth_grants':
      return listOAuthGrants(db, command.org);
    case 'oauth_revoke':
      return revokeOAuthGrant(db, command.grant);
    case 'org_limits':
      return organizationLimits(db, command.org, command.set, command.defaults);
    case 'approval_policy':
      return command.approve_above === undefined
        ? getApprovalPolicy(db, command.org)
        : setApprovalPolicy(db, command.org, command.approve_above);
  }
}

/**
 * Throws when a live opspad process holds the embedded database in `dataDir`; removes a socket
 * left behind by one that died. Call before opening PGlite.
 */
export async function ensureEmbeddedDatabaseFree(dataDir: string): Promise<void> {
  const path = controlSocketPath(dataDir);
  if (!existsSync(path)) {
    return;
  }
  if (await isLive(path)) {
    throw new ProblemError(
      `another opspad process is using the embedded database in ${dataDir} (OPSPAD_DATA_DIR)`,
      'Stop it first, or set DATABASE_URL to share a Postgres server between processes',
    );
  }
  rmSync(path, { force: true });
}

/** Serves key creation on the control socket while this process holds the embedded database. */
export async function listenLocalControl(dataDir: string, db: Database): Promise<Server> {
  const path = controlSocketPath(dataDir);
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) {
      chunks.push(chunk as Buffer);
    }
    try {
      if (req.method !== 'POST' || req.url !== '/keys') {
        res.writeHead(404).end();
        return;
      }
      const command = KeyCommand.parse(JSON.parse(Buffer.concat(chunks).toString('utf8')));
      const result = await runKeyCommand(db, command);
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ result }));
    } catch (error) {
      res.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify({ error: String(error) }));
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(path, () => resolve());
  });
  // Whoever may connect may create keys: the owner only, whatever the umask, and checked.
  chmodSync(path, PRIVATE_FILE_MODE);
  const mode = statSync(path).mode & 0o777;
  if (mode !== PRIVATE_FILE_MODE) {
    server.close();
    throw new ProblemError(
      `the control socket ${path} has mode 0${mode.toString(8)}, and could not be made 0600`,
      'Put OPSPAD_DATA_DIR on a file system that keeps Unix permissions',
    );
  }
  return server;
}

/** The reason a refusal gives, on one line (a running service answers `{"error": "…"}`). */
function refusal(text: string): string {
  try {
    const { error } = JSON.parse(text) as { error?: unknown };
    return String(error ?? text).split('\n')[0] ?? '';
  } catch {
    return text.slice(0, 200);
  }
}

function isLive(path: string): Promise<boolean> {
  return new Promise((resolve) => {
    const req = request({ socketPath: path, method: 'GET', path: '/ping', timeout: 1000 }, (res) => {
      res.resume();
      resolve(true);
    });
    req.on('error', () => resolve(false));
    req.on('timeout', () => {
      req.destroy();
      resolve(false);
    });
    req.end();
  });
}

/**
 * Runs a key command through a running service holding the embedded database; returns
 * undefined when none is listening (the caller then opens the database itself).
 */
export async function keyCommandViaLocalControl(
  dataDir: string,
  command: KeyCommand,
): Promise<{ result: unknown } | undefined> {
  const path = controlSocketPath(dataDir);
  if (!existsSync(path) || !(await isLive(path))) {
    return undefined;
  }
  return new Promise((resolve, reject) => {
    const req = request({ socketPath: path, method: 'POST', path: '/keys' }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        if (res.statusCode === 200) {
          resolve(JSON.parse(text) as { result: unknown });
        } else {
          reject(
            new ProblemError(
              `the opspad running on the embedded database in ${dataDir} refused the command (${refusal(text)})`,
              'Check the values given, or stop that opspad and run the command again',
            ),
          );
        }
      });
    });
    req.on('error', reject);
    req.end(JSON.stringify(command));
  });
}
