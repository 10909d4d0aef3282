/**
 * The `opspad` command. Parses the environment once, then runs one subcommand.
 */
import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import { BOARD_PATH } from '../api/board.ts';
import { openApiDocument } from '../api/openapi/document.ts';
import { type Config, ConfigError, loadConfig } from '../config/env.ts';
import { stdoutLogSink, writeStderr } from '../log-sink.ts';
import { createLogger, type Logger } from '../logger.ts';
import { serveMcpOverStdio } from '../mcp/stdio.ts';
import { migrateQueueBackend } from '../queue/open-queue-backend.ts';
import type { ApiKeySummary, CreatedApiKey } from '../store/index.ts';
import { isToolFormat, TOOL_FORMATS, toolsInFormat } from '../tools/formats.ts';
import { type KeyCommand, keyCommandViaLocalControl, runKeyCommand } from './local-control.ts';
import { boardLine, openForCommand, startLocal } from './local-service.ts';
import { exitOnSignals, shutdownAndExit, shutdownInProgress } from './process-exit.ts';
import { UsageError } from './usage-error.ts';
import { watchOperation } from './watch.ts';
import { webhooks } from './webhooks.ts';

const USAGE = `Usage: opspad <command> [options]

Commands:
  start                          Start the HTTP API, the workers and the reconciler.
  worker                         Start workers and the reconciler only (needs DATABASE_URL).
  migrate                        Apply database migrations, then exit.
  keys create --org <name>       Create an API key for an organization (created when new).
                [--json]         Print {"organization_id", "api_key"} as JSON.
  keys list --org <name>         List an organization's keys (ids and first characters).
  keys revoke <key_id|api_key>   Revoke a key: requests with it get 401 from then on.
  demo [--items N] [--exit]      Run a background operation of demo items (20,000, 5% failing)
                                 with a live progress bar, starting opspad here if none runs.
  ops watch <operation_id>       Follow an operation with a live progress bar until it ends
                                 (uses OPSPAD_URL and OPSPAD_API_KEY).
  mcp [--conversation <uuid>]    Serve opspad's tools and working memory to an MCP client over
                                 stdio (uses OPSPAD_URL and OPSPAD_API_KEY; --url, --key override
                                 them). Without --conversation, the session has its own.
  webhooks secret --org <name>   Show the organization's webhook signing secret (whsec_…);
                [--rotate]       replace it (the old one keeps signing for
                [--json]         OPSPAD_WEBHOOK_ROTATION_GRACE).
  tools print [--format F]       Print the tool definitions as JSON; F: opspad (default), openai
                                 (strict function calling), openai-responses or anthropic.
  openapi print                  Print the OpenAPI 3.1 document of the HTTP API (as served at
                                 /openapi.json), to generate a client in any language.
  help                           Show this help.

Configuration comes from the environment: DATABASE_URL (unset: embedded PGlite under
OPSPAD_DATA_DIR, default ./.opspad), REDIS_URL (unset: the jobs live in Postgres too),
OPSPAD_QUEUE_BACKEND, PORT, HOST, OPSPAD_HANDLERS and more; see README.md.`;

/** Runs until SIGINT or SIGTERM, then shuts down within OPSPAD_SHUTDOWN_TIMEOUT and exits. */
async function serve(config: Config, logger: Logger, role: 'all' | 'worker'): Promise<void> {
  const signals = exitOnSignals({ logger, timeoutMs: config.OPSPAD_SHUTDOWN_TIMEOUT });
  const service = await startLocal(config, logger, role);
  if (service.opspad.url) {
    writeStderr(`\n${boardLine(service.opspad)}\n`);
  }
  signals.started(service.shutdownSteps);
}

/**
 * `opspad demo`: a background operation of demo items end to end — on the running service if
 * there is one, else on one started here — with the live progress bar.
 */
async function demo(config: Config, args: string[]): Promise<number> {
  const { values } = parseArgs({
    args,
    options: {
      items: { type: 'string', default: '20000' },
      'failure-rate': { type: 'string', default: '0.05' },
      'latency-ms': { type: 'string', default: '25' },
      exit: { type: 'boolean', default: false },
    },
    strict: true,
  });
  const items = Number(values.items);
  const failureRate = Number(values['failure-rate']);
  const latencyMs = Number(values['latency-ms']);
  if (!Number.isInteger(items) || items < 1 || items > config.OPSPAD_MAX_ITEMS) {
    throw new UsageError(`--items must be a whole number from 1 to ${config.OPSPAD_MAX_ITEMS}`);
  }
  const baseUrl = (config.OPSPAD_URL ?? `http://${config.HOST}:${config.PORT}`).replace(/\/$/, '');
  const running = await fetch(`${baseUrl}/healthz`, { signal: AbortSignal.timeout(1000) }).then(
    (r) => r.ok,
    () => false,
  );
  // Logs would tear the progress bar apart: only warnings from a service started here.
  const logger = createLogger('warn');
  const stopping = { logger, timeoutMs: config.OPSPAD_SHUTDOWN_TIMEOUT };
  // A signal stops the service started here within the bound, as it stops `opspad start`.
  const signals = running ? undefined : exitOnSignals(stopping);
  const local = running ? undefined : await startLocal(config, logger, 'all');
  if (local) {
    signals?.started(local.shutdownSteps);
  }
  const url = local?.opspad.url ?? baseUrl;
  const created = (await (local
    ? runKeyCommand(local.db, { op: 'create', org: 'demo' })
    : keyCommand(config, { op: 'create', org: 'demo' }))) as CreatedApiKey;
  const out = process.stdout;
  out.write(`${running ? 'Using the opspad running at' : 'Started opspad at'} ${url} (organization "demo").\n`);
  const response = await fetch(`${url}/v1/conversations/${randomUUID()}/tools/manage_assistant_operation`, {
    method: 'POST',
    headers: { authorization: `Bearer ${created.api_key}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      action: 'create',
      operation_type: 'demo',
      execution: 'background',
      total_items: items,
      item_ids: Array.from({ length: items }, (_, i) => `demo-${i + 1}`),
      batch_size: 100,
      query_params: { latency_ms: latencyMs, failure_rate: failureRate },
      notes: 'opspad demo',
    }),
  });
  const body = (await response.json()) as { operation_id?: string; error?: { message: string } };
  if (!response.ok || !body.operation_id) {
    throw new Error(`creating the demo operation failed: ${body.error?.message ?? response.status}`);
  }
  out.write(
    `Operation ${body.operation_id}: ${items} items, ${failureRate * 100}% failing, ${latencyMs} ms per batch.\n`,
  );
  out.write(
    `${local ? boardLine(local.opspad) : `Bull Board: ${url}${BOARD_PATH}  user: ${config.OPSPAD_ADMIN_USER}  password: (OPSPAD_ADMIN_PASSWORD)`}\n`,
  );
  out.write(`Operator view: ${url}/admin/operations\n\n`);
  const last = await watchOperation({
    baseUrl: url,
    apiKey: created.api_key,
    operationId: body.operation_id,
    out,
  }).catch((error: unknown) => shutdownInProgress() ?? Promise.reject(error)); // a signal ended the stream
  if (last) {
    out.write(
      `\nDone: ${last.completed_count} completed, ${last.failed_count} failed of ${last.total_items} (${last.status}).\n`,
    );
  }
  if (local && !values.exit && out.isTTY) {
    out.write('opspad keeps running so you can look around; Ctrl-C stops it.\n');
    return -1;
  }
  const code = last?.status === 'completed' ? 0 : 1;
  return local ? shutdownAndExit(local.shutdownSteps, { ...stopping, exitCode: code }) : code;
}

async function opsWatch(config: Config, args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    options: { url: { type: 'string' }, key: { type: 'string' } },
    allowPositionals: true,
    strict: true,
  });
  const operationId = positionals[0];
  const apiKey = values.key ?? config.OPSPAD_API_KEY;
  if (!operationId || !apiKey) {
    throw new UsageError(
      'Usage: opspad ops watch <operation_id> [--url URL] [--key API_KEY] (or OPSPAD_URL, OPSPAD_API_KEY)',
    );
  }
  const baseUrl = (values.url ?? config.OPSPAD_URL ?? `http://${config.HOST}:${config.PORT}`).replace(/\/$/, '');
  const last = await watchOperation({ baseUrl, apiKey, operationId, out: process.stdout });
  return last && (last.status === 'completed' || last.status === 'cancelled') ? 0 : 1;
}

/** How long `opspad mcp` may live once its session has ended. */
const MCP_EXIT_WITHIN_MS = 1000;

const CONVERSATION_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** `opspad mcp`: an MCP server over stdio, talking to opspad over HTTP (see src/mcp/session.ts). */
async function mcp(config: Config, args: string[]): Promise<number> {
  const { values } = parseArgs({
    args,
    options: { conversation: { type: 'string' }, url: { type: 'string' }, key: { type: 'string' } },
    strict: true,
  });
  const conversationId = values.conversation?.trim().toLowerCase();
  // A missing key is reported to the model on each call (after initialize), not by exiting.
  const apiKey = values.key ?? config.OPSPAD_API_KEY ?? '';
  if (conversationId !== undefined && !CONVERSATION_ID.test(conversationId)) {
    throw new UsageError('--conversation must be a UUID you choose for the conversation');
  }
  const baseUrl = values.url ?? config.OPSPAD_URL ?? `http://${config.HOST}:${config.PORT}`;
  await serveMcpOverStdio({ baseUrl, apiKey, conversationId });
  // The session is over: a call opspad has not answered yet, or a keep-alive socket, must not
  // keep the process alive. The last answers get what is left of a second to reach the client.
  await stdoutLogSink().flush(MCP_EXIT_WITHIN_MS);
  return process.exit(0);
}

/** `opspad tools print`: the tool definitions in a vendor's format, built here (no server). */
function tools(args: string[]): number {
  const [verb, ...rest] = args;
  if (verb !== 'print') {
    throw new UsageError(`Unknown tools command "${verb ?? ''}". Use: opspad tools print [--format FORMAT]`);
  }
  const { values } = parseArgs({
    args: rest,
    options: { format: { type: 'string', default: 'opspad' } },
    strict: true,
  });
  if (!isToolFormat(values.format)) {
    throw new UsageError(`--format must be one of: ${TOOL_FORMATS.join(', ')} (got "${values.format}")`);
  }
  process.stdout.write(`${JSON.stringify({ tools: toolsInFormat(values.format) }, null, 2)}\n`);
  return 0;
}

/** `opspad openapi print`: the OpenAPI document, built here (no server). */
function openapi(args: string[]): number {
  if (args.length !== 1 || args[0] !== 'print') {
    process.stderr.write(`Unknown openapi command "${args.join(' ')}". Use: opspad openapi print\n`);
    return 2;
  }
  process.stdout.write(`${JSON.stringify(openApiDocument(), null, 2)}\n`);
  return 0;
}

/** Runs a key command through a running service on the embedded database, or directly. */
async function keyCommand(config: Config, command: KeyCommand): Promise<unknown> {
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

async function keys(config: Config, args: string[]): Promise<void> {
  const [verb, ...rest] = args;
  const { values, positionals } = parseArgs({
    args: rest,
    options: { org: { type: 'string' }, json: { type: 'boolean', default: false } },
    allowPositionals: true,
    strict: true,
  });
  const org = values.org?.trim();
  if (verb === 'create' || verb === 'list') {
    if (!org) {
      throw new UsageError(`keys ${verb} needs --org <name>, e.g. opspad keys ${verb} --org acme`);
    }
  }
  if (verb === 'create') {
    const created = (await keyCommand(config, { op: 'create', org: org as string })) as CreatedApiKey;
    process.stdout.write(
      values.json
        ? `${JSON.stringify({ organization_id: created.organization_id, api_key: created.api_key })}\n`
        : `Organization: ${created.organization_id}\nAPI key:      ${created.api_key}\nKeep the key: it is shown only now.\n`,
    );
    return;
  }
  if (verb === 'list') {
    const listed = (await keyCommand(config, { op: 'list', org: org as string })) as ApiKeySummary[];
    process.stdout.write(
      values.json
        ? `${JSON.stringify(listed)}\n`
        : `${listed.map((k) => `${k.key_id}  ${k.key_prefix}…  created ${k.created_at}${k.revoked_at ? `  revoked ${k.revoked_at}` : ''}`).join('\n') || '(no keys)'}\n`,
    );
    return;
  }
  if (verb === 'revoke') {
    const key = positionals[0];
    if (!key) {
      throw new UsageError('keys revoke needs a key id (from keys list) or the key itself');
    }
    const revoked = (await keyCommand(config, { op: 'revoke', key })) as ApiKeySummary | null;
    if (!revoked) {
      throw new Error(`no API key matches "${key.slice(0, 12)}"`);
    }
    process.stdout.write(
      values.json
        ? `${JSON.stringify(revoked)}\n`
        : `Revoked ${revoked.key_id} (${revoked.key_prefix}…) of ${revoked.organization}.\n`,
    );
    return;
  }
  throw new UsageError(`Unknown keys command "${verb ?? ''}". Use: opspad keys create|list|revoke`);
}

export async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (command === undefined || command === 'help' || command === '--help' || command === '-h') {
    process.stdout.write(`${USAGE}\n`);
    return command === undefined ? 2 : 0;
  }
  if (command === 'openapi') {
    // Reads no setting: runs whatever the environment holds.
    return openapi(rest);
  }
  let config: Config;
  try {
    config = loadConfig();
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`${error.message}\n`);
      return 2;
    }
    throw error;
  }
  const logger = createLogger(config.OPSPAD_LOG_LEVEL);
  try {
    switch (command) {
      case 'start':
        await serve(config, logger, 'all');
        return -1; // keeps running until a signal
      case 'worker':
        await serve(config, logger, 'worker');
        return -1;
      case 'demo':
        return await demo(config, rest);
      case 'ops':
        if (rest[0] !== 'watch') {
          throw new UsageError(`Unknown ops command "${rest[0] ?? ''}". Use: opspad ops watch <operation_id>`);
        }
        return await opsWatch(config, rest.slice(1));
      case 'migrate': {
        const db = await openForCommand(config);
        try {
          const queue = await migrateQueueBackend(config, db);
          process.stdout.write(`Migrations applied (${db.engine}${queue ? `; queue: ${queue}` : ''}).\n`);
        } finally {
          await db.close();
        }
        return 0;
      }
      case 'keys':
        await keys(config, rest);
        return 0;
      case 'webhooks':
        return await webhooks(config, rest, (command) => keyCommand(config, command));
      case 'mcp':
        return await mcp(config, rest);
      case 'tools':
        return tools(rest);
      default:
        throw new UsageError(`Unknown command "${command}".\n\n${USAGE}`);
    }
  } catch (error) {
    if (error instanceof UsageError || (error as { code?: string }).code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') {
      process.stderr.write(`${(error as Error).message}\n`);
      return 2;
    }
    process.stderr.write(`opspad ${command}: ${error instanceof Error ? error.message : String(error)}\n`);
    return 1;
  }
}
