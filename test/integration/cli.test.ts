/**
 * The `opspad` command as a newcomer meets it: keys, a clear refusal when Redis is down or a
 * variable is wrong, the embedded database shared with a running service, and the demo on a
 * machine with nothing but Node (no Redis, no Postgres: not one connection to either).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { demoFails } from '../../src/handlers/demo.ts';
import { queueSchemaFor } from '../../src/queue/queue-schema.ts';
import { authenticateApiKey, createPostgresDatabase, webhookSigningSecrets } from '../../src/store/index.ts';
import { startPrivateRedis } from '../helpers/private-redis.ts';
import { type CommandRun, RUN_TIMEOUT_MS, runOpspad } from '../helpers/processes.ts';

const BIN = fileURLToPath(new URL('../../bin/opspad.js', import.meta.url));
const RECORD_CONNECTIONS = new URL('../fixtures/record-connections.mjs', import.meta.url).href;

function opspad(
  args: string[],
  env: Record<string, string>,
  timeoutMs = RUN_TIMEOUT_MS,
  nodeArgs: string[] = [],
): Promise<CommandRun> {
  return runOpspad(args, { OPSPAD_LOG_LEVEL: 'warn', ...env }, { timeoutMs, nodeArgs });
}

describe('the opspad command', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'opspad-cli-'));
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

  it('creates an API key that authenticates, printing JSON', async () => {
    const databaseUrl = inject('databaseUrl');
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
    const databaseUrl = inject('databaseUrl');
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
    expect(revoked.stdout).toContain(`Revoked ${keys[0]?.key_id}`);
    const db = createPostgresDatabase({ connectionString: databaseUrl, poolSize: 1 });
    try {
      expect(await authenticateApiKey(db, apiKey)).toBeNull();
    } finally {
      await db.close();
    }
  });

  it("shows an organization's webhook secret and rotates it, the previous one signing through the grace", async () => {
    const databaseUrl = inject('databaseUrl');
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

    const unknown = await opspad(['webhooks', 'secret', '--org', `${org}-nobody`], env);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain(`No organization is named "${org}-nobody"`);
    const usage = await opspad(['webhooks', 'secret'], env);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain('Usage: opspad webhooks secret --org <name>');
  });

  it('stops at start with a message naming a bad variable', async () => {
    const run = await opspad(['start'], { PORT: 'eighty', OPSPAD_DATA_DIR: dataDir });
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('PORT: must be a port number');
  });

  it('says what to do when Redis is unreachable', async () => {
    const run = await opspad(['start'], {
      REDIS_URL: 'redis://127.0.0.1:1',
      PORT: '0',
      OPSPAD_DATA_DIR: dataDir,
    });
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(
      /Redis at redis:\/\/127\.0\.0\.1:1 is not reachable .*start it .*, or set REDIS_URL to one that runs, or unset both to keep the jobs in Postgres/,
    );
  });

  it('migrates opspad’s tables and the queue’s schema, and says so', async () => {
    const prefix = `${inject('queuePrefix')}-migrate`;
    const run = await opspad(['migrate'], { DATABASE_URL: inject('databaseUrl'), OPSPAD_QUEUE_PREFIX: prefix });
    expect(run.code, run.stderr).toBe(0);
    const schema = queueSchemaFor(prefix);
    expect(run.stdout).toBe(`Migrations applied (postgres; queue: Postgres schema ${schema} of DATABASE_URL).\n`);
    const db = createPostgresDatabase({ connectionString: inject('databaseUrl'), poolSize: 1 });
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
    const redis = await opspad(['migrate'], { DATABASE_URL: inject('databaseUrl'), REDIS_URL: inject('redisUrl') });
    expect(redis.stdout).toBe('Migrations applied (postgres).\n');
  });

  it('refuses a worker process without a shared Postgres', async () => {
    const run = await opspad(['worker'], { OPSPAD_DATA_DIR: dataDir, REDIS_URL: inject('redisUrl') });
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('opspad worker needs DATABASE_URL');
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
        OPSPAD_QUEUE_PREFIX: `${inject('queuePrefix')}-demo`,
      });
      expect(run.code, run.stderr).toBe(0);
      expect(run.stdout).toMatch(/^Started opspad at http:\/\/127\.0\.0\.1:\d+ \(organization "demo"\)\./);
      expect(run.stdout).toMatch(
        /Bull Board: http:\/\/127\.0\.0\.1:\d+\/admin\/queues {2}user: admin {2}password: \S+/,
      );
      const failing = Array.from({ length: 3000 }, (_, i) => demoFails(`demo-${i + 1}`, 0.05)).filter(Boolean).length;
      expect(run.stdout).toContain(`Done: ${3000 - failing} completed, ${failing} failed of 3000 (completed).`);
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
    timeout: 120_000,
  }, async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'opspad-start-'));
    const port = String(20_000 + Math.floor(Math.random() * 20_000));
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
      expect(demo.stdout).toMatch(/Done: \d+ completed, \d+ failed of 1500 \(completed\)\./);

      // A second service on the same embedded database is refused, not allowed to corrupt it.
      const second = await opspad(['start'], { ...env, PORT: String(Number(port) + 1) });
      expect(second.code).toBe(1);
      expect(second.stderr).toContain('Another opspad process is using the embedded database');

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
