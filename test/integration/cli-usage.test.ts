/**
 * The `opspad` command as a manual: `--help` on every command (found by walking the command tree,
 * so a new command is covered as soon as it exists) prints its usage and exits 0 without reading
 * a setting or opening a connection; `--version`; usage errors in the one shape of every failure
 * (`opspad <command>: <what was wrong>. <what to do>.`), naming the option at fault and followed
 * by the command's usage; and each command checking only the settings it reads.
 *
 * "Opens nothing" is measured, not assumed: DATABASE_URL, REDIS_URL, OPSPAD_URL and PORT all point
 * at a TCP listener of this test that counts the connections it receives, OPSPAD_DATA_DIR at a
 * folder that must not come into being, and other variables hold values no command accepts.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { allCommands, buildProgram, commandPath } from '../../src/cli/program.ts';
import { FAILURE_SHAPE } from '../helpers/failure-shape.ts';
import { fileDatabaseUrl } from '../helpers/file-database.ts';
import { type CommandRun, runOpspad } from '../helpers/processes.ts';

const VERSION = (
  JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }
).version;

/** `opspad <args>` with only PATH and `env` set. */
function opspad(args: readonly string[], env: Record<string, string>): Promise<CommandRun> {
  return runOpspad(args, env);
}

/** Every command and subcommand, as the words that run it (`[]` is `opspad` itself). */
const COMMANDS = allCommands(buildProgram(async () => {})).map((command) => commandPath(command).split(' ').slice(1));
const LEAVES = allCommands(buildProgram(async () => {}))
  .filter((command) => command.commands.length === 0)
  .map((command) => commandPath(command).split(' ').slice(1));

/** What a command needs besides options, so that only the unknown option is wrong. */
const REQUIRED: Readonly<Record<string, readonly string[]>> = {
  'keys create': ['--org', 'acme'],
  'keys list': ['--org', 'acme'],
  'keys revoke': ['key_0'],
  'oauth revoke': ['0b0c1c2e-3f0a-4c55-9d8e-2b1f3c4d5e6f'],
  'webhooks secret': ['--org', 'acme'],
  'ops watch': ['0b0c1c2e-3f0a-4c55-9d8e-2b1f3c4d5e6f'],
  'ops export': ['0b0c1c2e-3f0a-4c55-9d8e-2b1f3c4d5e6f'],
};

describe('opspad --help, --version and usage errors', () => {
  let counter: Server;
  let connections = 0;
  let env: Record<string, string>;
  const dataDir = join(mkdtempSync(join(tmpdir(), 'opspad-usage-')), 'data');

  beforeAll(async () => {
    counter = createServer((socket) => {
      connections += 1;
      socket.destroy();
    });
    await new Promise<void>((resolve) => counter.listen(0, '127.0.0.1', resolve));
    const { port } = counter.address() as { port: number };
    env = {
      DATABASE_URL: `postgres://127.0.0.1:${port}/opspad`,
      REDIS_URL: `redis://127.0.0.1:${port}`,
      OPSPAD_URL: `http://127.0.0.1:${port}`,
      PORT: String(port),
      OPSPAD_DATA_DIR: dataDir,
      OPSPAD_API_KEY: 'not-a-key',
      // Invalid for every command that reads them: a command that read its settings would stop.
      OPSPAD_LOG_LEVEL: 'loud',
      OPSPAD_ADMIN_PASSWORD: 'abc',
      OPSPAD_MAX_ITEMS: 'many',
    };
  });

  afterAll(async () => {
    await new Promise<void>((resolve) => counter.close(() => resolve()));
    rmSync(join(dataDir, '..'), { recursive: true, force: true });
  });

  it('knows every command the README lists', () => {
    expect(COMMANDS.map((words) => words.join(' ')).sort()).toEqual(
      [
        '',
        'start',
        'worker',
        'migrate',
        'keys',
        'keys create',
        'keys list',
        'keys revoke',
        'oauth',
        'oauth grants',
        'oauth revoke',
        'webhooks',
        'webhooks secret',
        'orgs',
        'orgs limits',
        'orgs policy',
        'demo',
        'ops',
        'ops watch',
        'ops export',
        'ops pause',
        'ops resume',
        'ops cancel',
        'ops retry-failed',
        'mcp',
        'tools',
        'tools print',
        'openapi',
        'openapi print',
      ].sort(),
    );
  });

  it('prints the usage of every command on --help and -h, exits 0, reads no setting and opens no connection', {
    timeout: 120_000,
  }, async () => {
    for (const words of COMMANDS) {
      for (const flag of ['--help', '-h']) {
        const run = await opspad([...words, flag], env);
        const name = ['opspad', ...words].join(' ');
        expect(run, `${name} ${flag}`).toMatchObject({ code: 0, stderr: '' });
        expect(run.stdout, `${name} ${flag}`).toContain(`Usage: ${name} `);
      }
    }
    // And `opspad keys help create`, the other way to ask.
    const help = await opspad(['keys', 'help', 'create'], env);
    expect(help).toMatchObject({ code: 0, stderr: '' });
    expect(help.stdout).toContain('Usage: opspad keys create --org <name> [--json]');
    expect(connections).toBe(0);
    expect(existsSync(dataDir)).toBe(false);
  });

  it('prints the version on --version and -V', async () => {
    for (const flag of ['--version', '-V']) {
      expect(await opspad([flag], env)).toEqual({ code: 0, stdout: `${VERSION}\n`, stderr: '' });
    }
  });

  it('refuses an unknown option with exit code 2, naming it, in the one shape, with the usage and where help is', {
    timeout: 120_000,
  }, async () => {
    for (const words of LEAVES) {
      const name = ['opspad', ...words].join(' ');
      const command = allCommands(buildProgram(async () => {})).find((c) => commandPath(c) === name);
      // With what the command needs, and without it: the unknown option is what is named first.
      for (const needed of [REQUIRED[words.join(' ')] ?? [], []]) {
        const run = await opspad([...words, ...needed, '--bogus'], env);
        expect(run, name).toMatchObject({ code: 2, stdout: '' });
        expect(run.stderr, name).toBe(
          `${name}: unknown option '--bogus'. Leave it out; --help lists the options.\n` +
            `  Usage: ${name} ${command?.usage()}\n` +
            `  Run '${name} --help' for more.\n`,
        );
      }
    }
    expect(connections).toBe(0);
  });

  it('names an unknown option before a missing required one, and guesses the option meant', async () => {
    const run = await opspad(['keys', 'create', '--organization', 'acme'], env);
    expect(run).toEqual({
      code: 2,
      stdout: '',
      stderr:
        "opspad keys create: unknown option '--organization'. Did you mean --org?\n" +
        '  Usage: opspad keys create --org <name> [--json]\n' +
        "  Run 'opspad keys create --help' for more.\n",
    });
    expect(connections).toBe(0);
  });

  it('refuses unknown commands, a missing argument or option and a bad option value with exit code 2, in the one shape', async () => {
    const unknown = await opspad(['strat'], env);
    expect(unknown).toMatchObject({ code: 2, stdout: '' });
    expect(unknown.stderr).toMatch(
      /^opspad: unknown command 'strat'\. Did you mean start\?\n {2}Usage: opspad <command>/,
    );

    const unknownSub = await opspad(['keys', 'rotate'], env);
    expect(unknownSub).toMatchObject({ code: 2, stdout: '' });
    expect(unknownSub.stderr).toMatch(/^opspad keys: unknown command 'rotate'\. /);

    const missing = await opspad(['keys', 'revoke'], env);
    expect(missing).toEqual({
      code: 2,
      stdout: '',
      stderr:
        "opspad keys revoke: missing required argument 'key'. Give it as the usage below shows.\n" +
        '  Usage: opspad keys revoke <key_id|api_key> [--json]\n' +
        "  Run 'opspad keys revoke --help' for more.\n",
    });

    const required = await opspad(['keys', 'create'], env);
    expect(required.code).toBe(2);
    expect(required.stderr).toMatch(
      /^opspad keys create: required option '--org <name>' not specified\. Add it, as the usage below shows\.\n/,
    );

    const blank = await opspad(['keys', 'create', '--org', ' '], env);
    expect(blank.code).toBe(2);
    expect(blank.stderr).toMatch(
      /^opspad keys create: --org is blank\. Give the organization's name, e\.g\. `opspad keys create --org acme`\.\n/,
    );

    const items = await opspad(['demo', '--items', '2.5'], env);
    expect(items.code).toBe(2);
    expect(items.stderr).toMatch(
      /^opspad demo: option '--items <n>' argument '2\.5' is invalid\. It must be a whole number of 1 or more\.\n {2}Usage: opspad demo /,
    );

    for (const run of [unknown, unknownSub, missing, required, blank, items]) {
      expect(run.stderr).toMatch(FAILURE_SHAPE);
    }

    // A command group without its subcommand: its help, on stderr, as a usage error.
    const group = await opspad(['webhooks'], env);
    expect(group).toMatchObject({ code: 2, stdout: '' });
    expect(group.stderr).toContain('Usage: opspad webhooks secret --org <name>');
    const bare = await opspad([], env);
    expect(bare).toMatchObject({ code: 2, stdout: '' });
    expect(bare.stderr).toContain('Usage: opspad <command> [options]');
    expect(connections).toBe(0);
  });
});

describe('each command checks only the settings it reads', () => {
  const SHORT_PASSWORD = { OPSPAD_ADMIN_PASSWORD: 'abc' };

  it('runs opspad mcp with a 3-character OPSPAD_ADMIN_PASSWORD (it serves no operator page)', async () => {
    const run = await opspad(['mcp'], { ...SHORT_PASSWORD, OPSPAD_URL: 'http://127.0.0.1:9' });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).not.toContain('OPSPAD_ADMIN_PASSWORD');
  });

  it('runs opspad migrate and opspad keys with it too', async () => {
    const env = { ...SHORT_PASSWORD, DATABASE_URL: fileDatabaseUrl(), REDIS_URL: inject('redisUrl') };
    const migrated = await opspad(['migrate'], env);
    expect(migrated).toEqual({ code: 0, stdout: 'Migrations applied (postgres).\n', stderr: '' });
    const org = `usage-${Date.now()}`;
    expect(await opspad(['keys', 'create', '--org', org, '--json'], env)).toMatchObject({ code: 0, stderr: '' });
    const listed = await opspad(['keys', 'list', '--org', org, '--json'], env);
    expect(listed).toMatchObject({ code: 0, stderr: '' });
    expect(JSON.parse(listed.stdout)).toHaveLength(1);
  });

  it('refuses it at opspad start, which serves Bull Board, naming the variable and what to do, before opening anything', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'opspad-short-password-'));
    try {
      const run = await opspad(['start'], { ...SHORT_PASSWORD, OPSPAD_DATA_DIR: join(dataDir, 'data'), PORT: '0' });
      expect(run.code).toBe(2);
      expect(run.stderr).toBe(
        'opspad start: OPSPAD_ADMIN_PASSWORD is not valid. Change it in the environment, then run `opspad start` again.\n' +
          '  - OPSPAD_ADMIN_PASSWORD: must be at least 8 characters: choose a longer one, or unset it for a random one printed at start\n',
      );
      expect(existsSync(join(dataDir, 'data'))).toBe(false);
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
