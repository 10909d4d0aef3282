/**
 * The `opspad` command tree, on commander. Only definitions live here: each action imports the
 * module that does the work when it runs, so `--help`, `--version` and a usage error load no
 * settings, open nothing and return at once.
 */
import { readFileSync } from 'node:fs';
import { Command, InvalidArgumentError } from 'commander';
import { registerOpsBulk } from './ops-bulk-command.ts';
import { registerOrgsLimits } from './orgs-limits.ts';
import { registerOrgsPolicy } from './orgs-policy.ts';
import { httpUrl } from './url-option.ts';

/** What an action returns: the exit code, or -1 when the process keeps running (a service). */
export type ExitCode = number;

/** package.json sits two folders above this module, in the sources and in dist/ alike. */
export function packageVersion(): string {
  const url = new URL('../../package.json', import.meta.url);
  return (JSON.parse(readFileSync(url, 'utf8')) as { version: string }).version;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

function wholeNumber(min: number) {
  return (value: string) => {
    const number = Number(value);
    if (!/^\s*\d+\s*$/.test(value) || !Number.isSafeInteger(number) || number < min) {
      throw new InvalidArgumentError(`It must be a whole number of ${min} or more.`);
    }
    return number;
  };
}

function fraction(value: string): number {
  const number = Number(value);
  if (value.trim() === '' || !Number.isFinite(number) || number < 0 || number > 1) {
    throw new InvalidArgumentError('It must be a number from 0 to 1.');
  }
  return number;
}

function conversationId(value: string): string {
  const id = value.trim().toLowerCase();
  if (!UUID.test(id)) {
    throw new InvalidArgumentError('It must be a UUID you choose for the conversation.');
  }
  return id;
}

function resultFormat(value: string): 'jsonl' | 'csv' {
  if (value === 'jsonl' || value === 'csv') {
    return value;
  }
  throw new InvalidArgumentError('It must be jsonl or csv.');
}

export interface DemoOptions {
  items: number;
  failureRate: number;
  latencyMs: number;
  exit: boolean;
}
export interface ClientOptions {
  url?: string;
  key?: string;
}
export interface ExportOptions extends ClientOptions {
  format: 'jsonl' | 'csv';
  failed: boolean;
}
export interface McpOptions extends ClientOptions {
  conversation?: string;
  keyFile?: string;
}
export interface KeysOptions {
  org: string;
  json: boolean;
}
export interface WebhookSecretOptions extends KeysOptions {
  rotate: boolean;
}

/** Runs `run` for `command`, recording its exit code. */
type Recorder = (run: () => Promise<ExitCode>) => Promise<void>;

/** The command tree; `record` receives each action's work and keeps its exit code. */
export function buildProgram(record: Recorder): Command {
  const program = new Command('opspad')
    .usage('<command> [options]')
    .description('Durable working memory for AI assistants doing bulk work, and the workers that do it.')
    .version(packageVersion(), '-V, --version', 'print the version of opspad')
    .helpOption('-h, --help', 'show help for a command')
    .helpCommand('help [command]', 'show help for a command')
    .addHelpText(
      'after',
      `
Settings come from environment variables (DATABASE_URL, REDIS_URL, PORT,
OPSPAD_…); each command reads only those it uses: see docs/configuration.md.
'opspad <command> --help' shows a command's options.`,
    );

  program
    .command('start')
    .description('Start the HTTP API, the workers and the reconciler; runs until SIGINT or SIGTERM.')
    .option(
      '--allow-open-data-dir',
      'start on an embedded data folder other users can read, making it private (it is refused otherwise)',
      false,
    )
    .action((options: { allowOpenDataDir: boolean }) =>
      record(async () => (await import('./serve.ts')).serve('all', options)),
    );

  program
    .command('worker')
    .description('Start workers and the reconciler only (needs DATABASE_URL); runs until SIGINT or SIGTERM.')
    .action(() => record(async () => (await import('./serve.ts')).serve('worker')));

  program
    .command('migrate')
    .description("Apply opspad's database migrations (and the Postgres queue schema's), then exit.")
    .action(() => record(async () => (await import('./migrate.ts')).migrate()));

  const keys = program
    .command('keys')
    .usage('<create|list|revoke> [options]')
    .description("Create, list and revoke organizations' API keys.");
  keys
    .command('create')
    .usage('--org <name> [--json]')
    .description('Create an API key for an organization (created when new); the key is shown only now.')
    .requiredOption('--org <name>', 'the organization')
    .option('--json', 'print {"organization_id", "api_key"} as JSON', false)
    .action((options: KeysOptions) => record(async () => (await import('./keys.ts')).createKey(options)));
  keys
    .command('list')
    .usage('--org <name> [--json]')
    .description("List an organization's keys: ids and first characters, never the keys.")
    .requiredOption('--org <name>', 'the organization')
    .option('--json', 'print the list as JSON', false)
    .action((options: KeysOptions) => record(async () => (await import('./keys.ts')).listKeys(options)));
  keys
    .command('revoke')
    .usage('<key_id|api_key> [--json]')
    .description('Revoke a key: requests with it get 401 from then on.')
    .argument('<key>', 'the key id (from keys list) or the key itself')
    .option('--json', 'print the revoked key as JSON', false)
    .action((key: string, options: { json: boolean }) =>
      record(async () => (await import('./keys.ts')).revokeKey(key, options)),
    );

  // What an operator sets per organization: each setting registers its subcommand here.
  const orgs = program
    .command('orgs')
    .usage('<policy|limits> [options]')
    .description("Organizations' policies and quotas.");
  registerOrgsPolicy(orgs, record);
  registerOrgsLimits(orgs, record);

  const oauth = program
    .command('oauth')
    .usage('<grants|revoke> [options]')
    .description('List and revoke the access operators granted to OAuth clients of /mcp.');
  oauth
    .command('grants')
    .usage('[--org <name>] [--json]')
    .description('List the grants: client, organization, who granted it and when, whether revoked.')
    .option('--org <name>', 'only this organization')
    .option('--json', 'print the list as JSON', false)
    .action((options: { org?: string; json: boolean }) =>
      record(async () => (await import('./oauth.ts')).listGrants(options)),
    );
  oauth
    .command('revoke')
    .usage('<grant_id> [--json]')
    .description("Revoke a grant: its client's tokens get 401 from then on, in every API process.")
    .argument('<grant_id>', 'the grant id (from oauth grants)')
    .option('--json', 'print {"revoked": true} as JSON', false)
    .action((grant: string, options: { json: boolean }) =>
      record(async () => (await import('./oauth.ts')).revokeGrant(grant, options)),
    );

  program
    .command('webhooks')
    .usage('secret --org <name> [--rotate] [--json]')
    .description("Organizations' webhook signing secrets.")
    .command('secret')
    .usage('--org <name> [--rotate] [--json]')
    .description(
      "Show the organization's webhook signing secret (whsec_…), or replace it: the previous one keeps signing for OPSPAD_WEBHOOK_ROTATION_GRACE.",
    )
    .requiredOption('--org <name>', 'the organization')
    .option('--rotate', 'replace the secret', false)
    .option('--json', 'print as JSON', false)
    .action((options: WebhookSecretOptions) =>
      record(async () => (await import('./webhooks.ts')).webhookSecret(options)),
    );

  program
    .command('demo')
    .usage('[--items N] [--failure-rate R] [--latency-ms MS] [--exit]')
    .description(
      'Run a background operation of demo items with a live progress bar, on the running opspad or on one started here.',
    )
    .option('--items <n>', 'how many items', wholeNumber(1), 20_000)
    .option('--failure-rate <r>', 'share of items that fail, from 0 to 1', fraction, 0.05)
    .option('--latency-ms <ms>', 'time one batch takes', wholeNumber(0), 25)
    .option('--exit', 'stop the opspad started here once the operation ends', false)
    .action((options: DemoOptions) => record(async () => (await import('./demo.ts')).demo(options)));

  const ops = program
    .command('ops')
    .usage('watch|export <operation_id> | pause|resume|cancel|retry-failed --org <name> [options]')
    .description('Follow operations, or act on every operation a filter matches.');
  ops
    .command('export')
    .usage('<operation_id> [--format jsonl|csv] [--failed] [--url URL] [--key API_KEY]')
    .description(
      "Write every item's outcome (item_id, status, reason, attempts, recorded_at) to stdout, in item order.",
    )
    .argument('<operation_id>', 'the operation')
    .option('--format <format>', 'jsonl (one JSON object a line) or csv', resultFormat, 'jsonl')
    .option('--failed', 'only the failed items', false)
    .option('--url <url>', 'the opspad API (default OPSPAD_URL, else http://HOST:PORT)', httpUrl)
    .option('--key <api_key>', 'the API key (default OPSPAD_API_KEY)')
    .action((operationId: string, options: ExportOptions) =>
      record(async () => (await import('./ops-export.ts')).opsExport(operationId, options)),
    );
  ops
    .command('watch')
    .usage('<operation_id> [--url URL] [--key API_KEY]')
    .description('Follow an operation with a live progress bar until it ends (exit 0: completed or cancelled).')
    .argument('<operation_id>', 'the operation')
    .option('--url <url>', 'the opspad API (default OPSPAD_URL, else http://HOST:PORT)', httpUrl)
    .option('--key <api_key>', 'the API key (default OPSPAD_API_KEY)')
    .action((operationId: string, options: ClientOptions) =>
      record(async () => (await import('./ops-watch.ts')).opsWatch(operationId, options)),
    );
  registerOpsBulk(ops, record);

  program
    .command('mcp')
    .usage('[--conversation <uuid>] [--url URL] [--key-file PATH]')
    .description(
      "Serve opspad's tools and working memory to an MCP client over stdio, talking to opspad over HTTP. Without --conversation, the session has a conversation of its own.",
    )
    .option('--conversation <uuid>', 'the conversation to work in', conversationId)
    .option('--url <url>', 'the opspad API (default OPSPAD_URL, else http://HOST:PORT)', httpUrl)
    .option('--key-file <path>', 'a file holding the API key (default OPSPAD_API_KEY)')
    .option('--key <api_key>', 'the API key; visible to other users in the process list: prefer --key-file')
    .action((options: McpOptions) => record(async () => (await import('./mcp.ts')).mcp(options)));

  program
    .command('tools')
    .usage('print [--format <format>]')
    .description('Tool definitions for function calling.')
    .command('print')
    .usage('[--format <format>]')
    .description('Print the tool definitions as JSON, built here (no server).')
    .option('--format <format>', 'opspad, openai (strict function calling), openai-responses or anthropic', 'opspad')
    .action((options: { format: string }) =>
      record(async () => (await import('./print.ts')).printTools(options.format)),
    );

  program
    .command('openapi')
    .usage('print')
    .description('The OpenAPI 3.1 description of the HTTP API.')
    .command('print')
    .description(
      'Print the OpenAPI document (as served at /openapi.json), built here (no server), to generate a client.',
    )
    .action(() => record(async () => (await import('./print.ts')).printOpenApi()));

  return program;
}

/** Every command of the tree, depth first (the program first). */
export function allCommands(command: Command): Command[] {
  return [command, ...command.commands.flatMap((sub) => allCommands(sub as Command))];
}

/** `opspad webhooks secret`: the words that run `command`. */
export function commandPath(command: Command): string {
  const names: string[] = [];
  for (let at: Command | null = command; at; at = at.parent) {
    names.unshift(at.name());
  }
  return names.join(' ');
}
