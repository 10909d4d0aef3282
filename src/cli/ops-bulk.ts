/**
 * The work of `opspad ops pause|resume|cancel|retry-failed`: through the running server's admin
 * API (/admin/bulk-actions), so each operation goes through the same path as an operator's click
 * and the workers get their pause and cancel signals. Previews the filter, asks (unless --yes;
 * without a terminal it refuses to guess), creates the action with the count it showed, and
 * follows its progress to the end.
 */

import { createInterface } from 'node:readline/promises';
import { setTimeout as delay } from 'node:timers/promises';
import { CommandError, UsageError } from './failure.ts';
import { BULK_COMMANDS, type BulkCommand, type OpsBulkOptions } from './ops-bulk-command.ts';
import { settingsFor } from './settings.ts';

const POLL_MS = 300;

interface Preview {
  matched: number;
  by_status: Record<string, number>;
  applicable: number | null;
  max_operations: number;
}

interface BulkAction {
  id: string;
  status: 'running' | 'done';
  matched: number;
  applied: number;
  skipped: number;
  pending: number;
  skipped_operations?: { operation_id: string; reason: string | null }[];
}

interface ErrorAnswer {
  error?: { code?: string; message?: string };
}

function adminClient(command: BulkCommand, options: OpsBulkOptions) {
  const config = settingsFor(`ops ${command}`);
  if (!config.OPSPAD_ADMIN_PASSWORD) {
    throw new UsageError(
      'OPSPAD_ADMIN_PASSWORD is not set',
      "Set it (and OPSPAD_ADMIN_USER if it is not admin) to the running opspad's operator sign-in",
    );
  }
  const baseUrl = (options.url ?? config.OPSPAD_URL ?? `http://${config.HOST}:${config.PORT}`).replace(/\/$/, '');
  const authorization = `Basic ${Buffer.from(`${config.OPSPAD_ADMIN_USER}:${config.OPSPAD_ADMIN_PASSWORD}`).toString('base64')}`;
  return async <T>(path: string, body?: unknown): Promise<T> => {
    let response: Response;
    try {
      response = await fetch(`${baseUrl}/admin/bulk-actions${path}`, {
        method: body === undefined ? 'GET' : 'POST',
        headers: { authorization, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(30_000),
      });
    } catch (error) {
      throw new CommandError(
        `opspad could not be reached at ${baseUrl}: ${(error as Error).message}`,
        'Check that it runs there (--url, or OPSPAD_URL), then run the command again',
        { cause: error },
      );
    }
    const answer = (await response.json().catch(() => ({}))) as T & ErrorAnswer;
    if (!response.ok) {
      const message = answer.error?.message ?? `HTTP ${response.status}`;
      throw response.status === 401
        ? new UsageError(
            `the operator sign-in was refused at ${baseUrl}`,
            'Check OPSPAD_ADMIN_USER and OPSPAD_ADMIN_PASSWORD',
          )
        : new CommandError(`opspad refused it: ${message}`, 'Fix what it names, then run the command again');
    }
    return answer;
  };
}

function filterOf(options: OpsBulkOptions) {
  return {
    org: options.org,
    type: options.type,
    status: options.status,
    created_before: options.createdBefore,
    created_after: options.createdAfter,
  };
}

async function confirmed(question: string): Promise<boolean> {
  const prompt = createInterface({ input: process.stdin, output: process.stderr });
  try {
    return /^y(es)?$/i.test((await prompt.question(`${question} [y/N] `)).trim());
  } finally {
    prompt.close();
  }
}

export async function opsBulk(command: BulkCommand, options: OpsBulkOptions): Promise<number> {
  const { action } = BULK_COMMANDS[command];
  const call = adminClient(command, options);
  const filter = filterOf(options);
  if (Object.values(filter).every((value) => value === undefined)) {
    throw new UsageError(
      'no filter was given',
      `Name the operations: at least one of --org, --type, --status, --created-before, --created-after`,
    );
  }
  const say = (line: string) => (options.json ? process.stderr : process.stdout).write(`${line}\n`);

  const preview = await call<Preview>('/preview', { action, filter });
  const byStatus = Object.entries(preview.by_status)
    .map(([status, n]) => `${n} ${status}`)
    .join(', ');
  const changes = preview.applicable === null ? '' : `; ${command} changes ${preview.applicable} of them now`;
  say(`${preview.matched} operation(s) match${byStatus ? ` (${byStatus})` : ''}${changes}.`);
  if (preview.matched === 0) {
    if (options.json) {
      process.stdout.write(`${JSON.stringify({ matched: 0 })}\n`);
    }
    return 0;
  }
  if (!options.yes) {
    if (!process.stdin.isTTY) {
      throw new UsageError(
        'there is no terminal to confirm on',
        `Run it again with --yes to ${command} these ${preview.matched} operation(s)`,
      );
    }
    if (!(await confirmed(`${command} ${preview.matched} operation(s)?`))) {
      say('Nothing was changed.');
      return 1;
    }
  }
  const created = await call<BulkAction>('', { action, filter, expected_matched: preview.matched });
  say(`Bulk action ${created.id}: ${command} of ${created.matched} operation(s).`);
  let current = created;
  let shown = '';
  while (current.status !== 'done') {
    await delay(POLL_MS);
    current = await call<BulkAction>(`/${created.id}`);
    const line = `applied ${current.applied}, skipped ${current.skipped}, pending ${current.pending}`;
    if (line !== shown && !options.json) {
      say(line);
      shown = line;
    }
  }
  const done = await call<BulkAction>(`/${created.id}`);
  if (options.json) {
    process.stdout.write(`${JSON.stringify(done, null, 2)}\n`);
    return 0;
  }
  say(`Done: ${done.applied} applied, ${done.skipped} skipped of ${done.matched}.`);
  for (const skipped of (done.skipped_operations ?? []).slice(0, 10)) {
    say(`  skipped ${skipped.operation_id}: ${skipped.reason ?? ''}`);
  }
  return 0;
}
