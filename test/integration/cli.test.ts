/**
 * The `opspad` command as a newcomer meets it: keys, a clear refusal — in the one shape of every
 * failure, naming the setting or option and what to do — when Redis or Postgres is down, a
 * variable is wrong, an organization does not exist or no opspad answers; the embedded database
 * shared with a running service; and the demo on a machine with nothing but Node (no Redis, no
 * Postgres: not one connection to either), its progress drawn once to 100 %, and Ctrl-C saying
 * what became of the operation.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, describe, expect, inject, it } from 'vitest';
import { demoFails } from '../../src/handlers/demo.ts';
import { queueSchemaFor } from '../../src/queue/queue-schema.ts';
import { authenticateApiKey, createPostgresDatabase, webhookSigningSecrets } from '../../src/store/index.ts';
import { FAILURE_SHAPE } from '../helpers/failure-shape.ts';
import { fileDatabaseUrl, fileQueuePrefix } from '../helpers/file-database.ts';
import { startPrivateRedis } from '../helpers/private-redis.ts';
import {
  type CommandRun,
  EXIT_TIMEOUT_MS,
  killAllChildren,
  RUN_TIMEOUT_MS,
  runOpspad,
  spawnOpspad,
  within,
} from '../helpers/processes.ts';
import { freePort } from '../helpers/stdout-readers.ts';

const BIN = fileURLToPath(new URL('../../bin/opspad.js', import.meta.url));
const RECORD_CONNECTIONS = new URL('../fixtures/record-connections.mjs', import.meta.url).href;

/** A loopback port nothing listens on (one this test held and let go). */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** How many times the demo drew its bar at 100 % (output not on a terminal: one line each). */
function fullBars(stdout: string, items: number): number {
  return stdout.split('\n').filter((line) => line.includes(` ${items}/${items} 100.0% `)).length;
}

function opspad(
  args: string[],
  env: Record<string, string>,
  timeoutMs = RUN_TIMEOUT_MS,
  nodeArgs: string[] = [],
): Promise<CommandRun> {
  return runOpspad(args, { OPSPAD_LOG_LEVEL: 'warn', ...env }, { timeoutMs, nodeArgs });
}

afterEach(killAllChildren);

describe('the opspad command', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'opspad-cli-'));
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

  it('creates an API key that authenticates, printing JSON', async () => {
    const databaseUrl = fileDatabaseUrl();
    const run = await opspad(['keys', 'create', '--org', `cli-${Date.now()}`, '--json'], { DATABASE_URL: databaseUrl });
    expect(run.code, run.stderr).toBe(0);
    const printed = JSON.parse(run.stdout) as { organization_id: string; api_key: string };
    expect(Object.keys(printed).sort()).toEqual(['api_key', 'organization_id']);
    const db = createPostgresDatabase({ connectionString: databaseUrl, poolSize: 1 });
    try {
      expect(await authenticateApiKey(db, printed.api_key)).toMatchObject({ organizationId: printed.organization_id });
    } finally {
      await db.close();
    }
  });

  it("lists an organization's keys and revokes one, which then no longer authenticates", async () => {
    const databaseUrl = fileDatabaseUrl();
    const org = `cli-revoke-${Date.now()}`;
    const created = await opspad(['keys', 'create', '--org', org, '--json'], { DATABASE_URL: databaseUrl });
    const { api_key: apiKey } = JSON.parse(created.stdout) as { api_key: string };
    const listed = await opspad(['keys', 'list', '--org', org, '--json'], { DATABASE_URL: databaseUrl });
    const keys = JSON.parse(listed.stdout) as { key_id: string; key_prefix: string; revoked_at: string | null }[];
    expect(keys).toHaveLength(1);
    expect(apiKey.startsWith(keys[0]?.key_prefix as string)).toBe(true);
    expect(listed.stdout).not.toContain(apiKey);

    const revoked = await opspad(['keys', 'revoke', keys[0]?.key_id as string], { DATABASE_URL: databaseUrl });
    expect(revoked.code, revoked.stderr).toBe(0);
    const none = await opspad(['keys', 'revoke', 'no-such-key'], { DATABASE_URL: databaseUrl });
    expect(none).toEqual({
      code: 1,
      stdout: '',
      stderr:
        'opspad keys revoke: no API key matches "no-such-key". Give a key id from `opspad keys list --org <name>`, or the whole key.\n',
    });
    expect(revoked.stdout).toContain(`Revoked ${keys[0]?.key_id}`);
    const db = createPostgresDatabase({ connectionString: databaseUrl, poolSize: 1 });
    try {
      expect(await authenticateApiKey(db, apiKey)).toBeNull();
    } finally {
      await db.close();
    }
  });

  it("shows an organization's webhook secret and rotates it, the previous one signing through the grace", async () => {
    const databaseUrl = fileDatabaseUrl();
    const org = `cli-webhooks-${Date.now()}`;
    const env = { DATABASE_URL: databaseUrl, OPSPAD_WEBHOOK_ROTATION_GRACE: '1h' };
    const created = await opspad(['keys', 'create', '--org', org, '--json'], env);
    const { organization_id: organizationId } = JSON.parse(created.stdout) as { organization_id: string };

    const shown = await opspad(['webhooks', 'secret', '--org', org, '--json'], env);
    expect(shown.code, shown.stderr).toBe(0);
    const first = JSON.parse(shown.stdout) as { organization_id: string; secret: string; previous: unknown[] };
    expect(first).toMatchObject({ organization_id: organizationId, organization: org, previous: [] });
    expect(first.secret).toMatch(/^whsec_/);

    const rotated = await opspad(['webhooks', 'secret', '--org', org, '--rotate'], env);
    expect(rotated.code, rotated.stderr).toBe(0);
    expect(rotated.stdout).toMatch(/Webhook secret: whsec_\S+/);
    expect(rotated.stdout).toContain('Rotated');
    expect(rotated.stdout).not.toContain(first.secret);
    const db = createPostgresDatabase({ connectionString: databaseUrl, poolSize: 1 });
    try {
      const signing = await webhookSigningSecrets(db, organizationId);
      expect(signing).toHaveLength(2);
      expect(signing[1]).toBe(first.secret);
      expect(rotated.stdout).toContain(signing[0]);
      const [row] = await db.query<{ expires_at: Date }>(
        'SELECT expires_at FROM organization_webhook_secret WHERE secret = $1',
        [first.secret],
      );
      const inMs = (row?.expires_at.getTime() ?? 0) - Date.now();
      expect(inMs).toBeGreaterThan(55 * 60_000);
      expect(inMs).toBeLessThanOrEqual(3_600_000);
    } finally {
      await db.close();
    }

    // An organization that does not exist is the same failure for both commands that name one.
    for (const command of [
      ['webhooks', 'secret'],
      ['keys', 'list'],
    ]) {
      const unknown = await opspad([...command, '--org', `${org}-nobody`], env);
      expect(unknown).toEqual({
        code: 1,
        stdout: '',
        stderr: `opspad ${command.join(' ')}: no organization is named "${org}-nobody" (--org). Check the name, or create the organization with its first key: \`opspad keys create --org ${org}-nobody\`.\n`,
      });
    }
    const usage = await opspad(['webhooks', 'secret'], env);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain('Usage: opspad webhooks secret --org <name>');
  });

  it('stops at start with a message naming a bad variable', async () => {
    const run = await opspad(['start'], { PORT: 'eighty', OPSPAD_DATA_DIR: dataDir });
    expect(run).toEqual({
      code: 2,
      stdout: '',
      stderr:
        'opspad start: PORT is not valid. Change it in the environment, then run `opspad start` again.\n' +
        '  - PORT: must be a port number (got "eighty")\n',
    });
  });

  it('says what to do when Redis is unreachable', async () => {
    const run = await opspad(['start'], {
      REDIS_URL: 'redis://127.0.0.1:1',
      PORT: '0',
      OPSPAD_DATA_DIR: dataDir,
    });
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(
      /^opspad start: failed at Redis: Redis at redis:\/\/127\.0\.0\.1:1\/? is not reachable \(.+\), and the queue backend is Redis \(REDIS_URL or OPSPAD_QUEUE_BACKEND=redis is set\)\. Start it \(e\.g\. redis-server\), or set REDIS_URL to one that runs, or unset both to keep the jobs in Postgres\.\n$/,
    );
  });

  it('names the server and the variable when DATABASE_URL refuses, never its password', async () => {
    const port = await closedPort();
    const run = await opspad(['keys', 'list', '--org', 'acme'], {
      DATABASE_URL: `postgres://opspad:s3cret-pw@127.0.0.1:${port}/opspad`,
    });
    expect(run).toEqual({
      code: 1,
      stdout: '',
      stderr: `opspad keys list: Postgres at 127.0.0.1:${port} (DATABASE_URL) refused the connection. Check that Postgres runs there and that DATABASE_URL names its host and port, or unset DATABASE_URL to use the embedded database.\n`,
    });
    // A database that does not exist on a server that runs.
    const url = new URL(fileDatabaseUrl());
    url.pathname = '/opspad_no_such_database';
    const missing = await opspad(['migrate'], { DATABASE_URL: url.toString() });
    expect(missing).toEqual({
      code: 1,
      stdout: '',
      stderr: `opspad migrate: Postgres at ${url.hostname}:${url.port || '5432'} (DATABASE_URL) has no database "opspad_no_such_database". Create it (\`createdb opspad_no_such_database\`), or set DATABASE_URL to a database that exists.\n`,
    });
  });

  it('says where no opspad answers and how to start one, for opspad ops watch', async () => {
    const port = await closedPort();
    const run = await opspad(['ops', 'watch', '0b0c1c2e-3f0a-4c55-9d8e-2b1f3c4d5e6f', '--key', 'opk_x'], {
      OPSPAD_URL: `http://127.0.0.1:${port}`,
    });
    expect(run).toEqual({
      code: 1,
      stdout: '',
      stderr: `opspad ops watch: no opspad answers at http://127.0.0.1:${port} (connect ECONNREFUSED 127.0.0.1:${port}). Start it (\`opspad start\`), or point --url or OPSPAD_URL at where it runs.\n`,
    });
    const keyless = await opspad(['ops', 'watch', '0b0c1c2e-3f0a-4c55-9d8e-2b1f3c4d5e6f'], {
      OPSPAD_URL: `http://127.0.0.1:${port}`,
    });
    expect(keyless.code).toBe(2);
    expect(keyless.stderr).toMatch(
      /^opspad ops watch: no API key was given\. Pass --key <api_key>, or set OPSPAD_API_KEY; `opspad keys create --org <name>` makes one\.\n/,
    );
  });

  it('migrates opspad’s tables and the queue’s schema, and says so', async () => {
    const prefix = `${fileQueuePrefix()}-migrate`;
    const run = await opspad(['migrate'], { DATABASE_URL: fileDatabaseUrl(), OPSPAD_QUEUE_PREFIX: prefix });
    expect(run.code, run.stderr).toBe(0);
    const schema = queueSchemaFor(prefix);
    expect(run.stdout).toBe(`Migrations applied (postgres; queue: Postgres schema ${schema} of DATABASE_URL).\n`);
    const db = createPostgresDatabase({ connectionString: fileDatabaseUrl(), poolSize: 1 });
    try {
      const tables = await db.query<{ name: string }>(
        `SELECT tablename AS name FROM pg_tables WHERE schemaname = $1 AND tablename IN ('job', 'migration', 'opspad_rate_window') ORDER BY 1`,
        [schema],
      );
      expect(tables.map((t) => t.name)).toEqual(['job', 'migration', 'opspad_rate_window']);
    } finally {
      await db.close();
    }
    // With the jobs in Redis there is no queue schema to migrate.
    const redis = await opspad(['migrate'], { DATABASE_URL: fileDatabaseUrl(), REDIS_URL: inject('redisUrl') });
    expect(redis.stdout).toBe('Migrations applied (postgres).\n');
  });

  it('refuses a worker process without a shared Postgres', async () => {
    const run = await opspad(['worker'], { OPSPAD_DATA_DIR: dataDir, REDIS_URL: inject('redisUrl') });
    expect(run).toEqual({
      code: 2,
      stdout: '',
      stderr:
        'opspad worker: DATABASE_URL is not set, and workers in processes of their own share one Postgres server. Set DATABASE_URL to that server, or run `opspad start`, whose workers share its embedded database.\n',
    });
  });
});

describe('opspad demo on a fresh data folder', () => {
  it('starts opspad itself, runs the demo operation to the end with the progress bar, and stops', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'opspad-demo-'));
    try {
      const run = await opspad(['demo', '--items', '3000', '--latency-ms', '5', '--exit'], {
        OPSPAD_DATA_DIR: dataDir,
        PORT: '0',
        REDIS_URL: inject('redisUrl'),
        OPSPAD_QUEUE_PREFIX: `${fileQueuePrefix()}-demo`,
      });
      expect(run.code, run.stderr).toBe(0);
      expect(run.stdout).toMatch(/^Started opspad at http:\/\/127\.0\.0\.1:\d+ \(organization "demo"\)\./);
      expect(run.stdout).toMatch(
        /Bull Board: http:\/\/127\.0\.0\.1:\d+\/admin\/queues {2}user: admin {2}password: \S+/,
      );
      const failing = Array.from({ length: 3000 }, (_, i) => demoFails(`demo-${i + 1}`, 0.05)).filter(Boolean).length;
      expect(run.stdout).toContain(`Done: ${3000 - failing} completed, ${failing} failed of 3000 (completed).`);
      // The bar reaches 100 % once, with the final status.
      expect(fullBars(run.stdout, 3000)).toBe(1);
      expect(run.stdout).toMatch(/ 3000\/3000 100\.0% · \d+ failed · .* · completed\n/);
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});

describe('opspad demo interrupted with Ctrl-C', () => {
  it('stops the opspad it started, says the operation is left as it is, and the next start finishes it', {
    timeout: 300_000,
  }, async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'opspad-demo-interrupted-'));
    const env = { OPSPAD_DATA_DIR: dataDir, PORT: '0', OPSPAD_LOG_LEVEL: 'warn' };
    try {
      const demo = spawnOpspad('demo', ['demo', '--items', '6000', '--latency-ms', '100'], env);
      await demo.waitForLine((line) => line.includes('/6000 '), 'the first progress line', 120_000);
      demo.process.kill('SIGINT');
      expect(await demo.waitForExit(60_000)).toEqual({ code: 0, signal: null });
      await within(demo.closed, EXIT_TIMEOUT_MS, 'the demo’s output');
      const output = demo.lines.join('\n');
      const operationId = /^Operation ([0-9a-f-]{36}):/m.exec(output)?.[1] as string;
      expect(demo.lines.at(-1)).toMatch(
        new RegExp(
          `^Interrupted: opspad is stopping here, and operation ${operationId} is left as it is \\(active, [\\d,]+ of 6,000 items done\\); it goes on when opspad starts again on the same database\\.$`,
        ),
      );
      expect(output).not.toContain('Done:');
      expect(output).not.toMatch(/\(active\)\./);

      // As it says: started again on the same data folder, opspad finishes the operation.
      const port = String(await freePort());
      const service = spawnOpspad('start', ['start'], { ...env, PORT: port, OPSPAD_LOG_LEVEL: 'info' });
      await service.waitForLine((line) => line.includes('opspad API listening'), 'the API to listen', 120_000);
      const key = await opspad(['keys', 'create', '--org', 'demo', '--json'], env);
      const { api_key: apiKey } = JSON.parse(key.stdout) as { api_key: string };
      const watched = await opspad(['ops', 'watch', operationId, '--key', apiKey], { ...env, PORT: port }, 120_000);
      expect(watched.code, watched.stderr).toBe(0);
      expect(watched.stdout).toMatch(/ 6000\/6000 100\.0% · \d+ failed · .* · completed\n$/);
      service.process.kill('SIGTERM');
      expect(await service.waitForExit(60_000)).toEqual({ code: 0, signal: null });
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});

describe('opspad demo with nothing but Node', () => {
  const failing = (items: number) =>
    Array.from({ length: items }, (_, i) => demoFails(`demo-${i + 1}`, 0.05)).filter(Boolean).length;

  it('runs on the embedded database with its queue there too: exact counts, no connection to Redis or Postgres', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'opspad-demo-noredis-'));
    const log = join(dataDir, 'connections.txt');
    try {
      // No REDIS_URL, no DATABASE_URL, no OPSPAD_QUEUE_BACKEND: what `npx opspad demo` sees on a
      // laptop with only Node.
      const run = await opspad(
        ['demo', '--items', '2000', '--latency-ms', '5', '--exit'],
        { OPSPAD_DATA_DIR: dataDir, PORT: '0', OPSPAD_TEST_CONNECTION_LOG: log },
        90_000,
        ['--import', RECORD_CONNECTIONS],
      );
      expect(run.code, run.stderr).toBe(0);
      const port = /^Started opspad at http:\/\/127\.0\.0\.1:(\d+) /.exec(run.stdout)?.[1];
      expect(port).toBeDefined();
      expect(run.stdout).toContain(
        `Done: ${2000 - failing(2000)} completed, ${failing(2000)} failed of 2000 (completed).`,
      );
      // Its only TCP connections: the "is opspad already running?" probe (PORT) and its own API.
      const connections = readFileSync(log, 'utf8').split('\n').filter(Boolean);
      expect(connections.length).toBeGreaterThan(0);
      expect(new Set(connections)).toEqual(new Set(['127.0.0.1:0', `127.0.0.1:${port}`]));
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it('leaves Redis alone when told to keep the jobs in Postgres, even with REDIS_URL set', async () => {
    const redis = await startPrivateRedis();
    const dataDir = mkdtempSync(join(tmpdir(), 'opspad-demo-pgqueue-'));
    try {
      const before = await redis.connectionsReceived();
      const run = await opspad(['demo', '--items', '500', '--latency-ms', '5', '--exit'], {
        OPSPAD_DATA_DIR: dataDir,
        PORT: '0',
        REDIS_URL: redis.url,
        OPSPAD_QUEUE_BACKEND: 'postgres',
      });
      expect(run.code, run.stderr).toBe(0);
      expect(run.stdout).toContain(`Done: ${500 - failing(500)} completed, ${failing(500)} failed of 500 (completed).`);
      expect(await redis.connectionsReceived()).toBe(before);
    } finally {
      await redis.stop();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});

describe('opspad start on the embedded database, with nothing but Node', () => {
  it('serves the API, creates keys beside it through the control socket, and stops on SIGTERM', {
    timeout: 240_000,
  }, async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'opspad-start-'));
    const port = String(await freePort());
    // `npm start` on a machine with no Redis and no Postgres: no REDIS_URL, no DATABASE_URL.
    const env = {
      PATH: process.env.PATH ?? '',
      OPSPAD_DATA_DIR: dataDir,
      PORT: port,
      OPSPAD_LOG_LEVEL: 'info',
    };
    const log = join(dataDir, 'connections.txt');
    const server = spawn(process.execPath, ['--import', RECORD_CONNECTIONS, BIN, 'start'], {
      env: { ...env, OPSPAD_TEST_CONNECTION_LOG: log },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    server.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const exited = new Promise<number | null>((resolve) => server.on('exit', resolve));
    try {
      // Ready once it prints where Bull Board is, after the API listens.
      server.stdout.resume();
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`start did not listen: ${stderr}`)), 60_000);
        server.stderr.on('data', () => {
          if (stderr.includes('Bull Board:')) {
            clearTimeout(timer);
            resolve();
          }
        });
        void exited.then(() => reject(new Error(`start exited: ${stderr}`)));
      });
      expect(stderr).toMatch(/Bull Board: http:\/\/127\.0\.0\.1:\d+\/admin\/queues {2}user: admin {2}password: \S+/);

      const keys = await opspad(['keys', 'create', '--org', 'acme', '--json'], env);
      expect(keys.code, keys.stderr).toBe(0);
      const { api_key: apiKey } = JSON.parse(keys.stdout) as { api_key: string };
      const conversation = '7b0c1c2e-3f0a-4c55-9d8e-2b1f3c4d5e6f';
      const response = await fetch(
        `http://127.0.0.1:${port}/v1/conversations/${conversation}/tools/manage_assistant_operation`,
        {
          method: 'POST',
          headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
          body: JSON.stringify({ action: 'create', operation_type: 'send_sms', total_items: 2, item_ids: ['a', 'b'] }),
        },
      );
      expect(response.status).toBe(200);

      // The demo uses the running service (its key made through the control socket).
      const demo = await opspad(['demo', '--items', '1500', '--latency-ms', '5'], env);
      expect(demo.code, demo.stderr).toBe(0);
      expect(demo.stdout).toContain(`Using the opspad running at http://127.0.0.1:${port}`);
      expect(demo.stdout).toMatch(/1500\/1500 100\.0% · \d+ failed/);
      expect(fullBars(demo.stdout, 1500)).toBe(1);
      expect(demo.stdout).toMatch(/Done: \d+ completed, \d+ failed of 1500 \(completed\)\./);

      // Ctrl-C beside a running service stops following; the operation goes on there.
      const interrupted = spawnOpspad('demo', ['demo', '--items', '6000', '--latency-ms', '100'], env);
      await interrupted.waitForLine((line) => line.includes('/6000 '), 'the first progress line');
      interrupted.process.kill('SIGINT');
      expect(await interrupted.waitForExit()).toEqual({ code: 130, signal: null });
      await within(interrupted.closed, EXIT_TIMEOUT_MS, 'the demo’s output');
      const operationId = /^Operation ([0-9a-f-]{36}):/m.exec(interrupted.lines.join('\n'))?.[1];
      expect(interrupted.lines.at(-1)).toMatch(
        new RegExp(
          `^Interrupted: operation ${operationId} keeps running on the opspad at http://127\\.0\\.0\\.1:${port} \\(active, [\\d,]+ of 6,000 items done\\); the operator view follows it: http://127\\.0\\.0\\.1:${port}/admin/operations/${operationId}$`,
        ),
      );
      expect(interrupted.lines.join('\n')).not.toContain('Done:');

      // A wrong key is named as such, not dumped as the server's JSON.
      const wrongKey = await opspad(['ops', 'watch', operationId as string, '--key', 'opk_wrong'], env);
      expect(wrongKey).toEqual({
        code: 1,
        stdout: '',
        stderr: `opspad ops watch: opspad at http://127.0.0.1:${port} refused the API key (--key or OPSPAD_API_KEY): The API key is not valid or was revoked. Give a key of the organization the operation belongs to; \`opspad keys create --org <name>\` makes one.\n`,
      });

      // A second service on the same embedded database is refused, not allowed to corrupt it.
      const second = await opspad(['start'], { ...env, PORT: String(Number(port) + 1) });
      expect(second).toEqual({
        code: 1,
        stdout: '',
        stderr: `opspad start: failed at database: another opspad process is using the embedded database in ${dataDir} (OPSPAD_DATA_DIR). Stop it first, or set DATABASE_URL to share a Postgres server between processes.\n`,
      });
      // On the port it uses, the refusal comes before the database is even looked at.
      const samePort = await opspad(['start'], env);
      expect(samePort).toEqual({
        code: 1,
        stdout: '',
        stderr: `opspad start: PORT ${port} on 127.0.0.1 is in use by another process. Stop that process, or set PORT to a free port.\n`,
      });
      for (const run of [wrongKey, second, samePort]) {
        expect(run.stderr).toMatch(FAILURE_SHAPE);
      }

      server.kill('SIGTERM');
      expect(await exited).toBe(0);
      // The service itself opened no TCP connection at all (it only answered them).
      expect(readFileSync(log, 'utf8')).toBe('');
    } finally {
      server.kill('SIGKILL');
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
