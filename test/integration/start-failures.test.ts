/**
 * A start that fails closes what it opened and says where it failed. Each case runs in a child
 * process that must end by itself — its event loop empty: no pool, socket, worker, timer or
 * listening server left behind — with exit code 1 and one line naming the step, what was wrong
 * (the setting involved) and what to do. The bound on time is the test's timeout only.
 *
 * Real failures through `opspad start` where the outside world can cause them (Redis or Postgres
 * unreachable, a database user who may not create tables, a handler module that throws while it
 * loads, on Postgres and on the embedded database); the port taken, refused before anything is
 * opened; every step of createOpspad, in order, through its test hook
 * (test/fixtures/start-failing-at.mjs).
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { START_STEPS } from '../../src/main.ts';
import { fileDatabaseUrl, fileQueuePrefix } from '../helpers/file-database.ts';
import { type CommandRun, runNode } from '../helpers/processes.ts';

const BIN = fileURLToPath(new URL('../../bin/opspad.js', import.meta.url));
const FAILING_AT = fileURLToPath(new URL('../fixtures/start-failing-at.mjs', import.meta.url));
const THROWING_HANDLER = fileURLToPath(new URL('../fixtures/handler-throws-on-import.mjs', import.meta.url));

/** Runs `node <args>` until it exits by itself. */
function run(args: readonly string[], env: Record<string, string>): Promise<CommandRun> {
  return runNode(args, { OPSPAD_LOG_LEVEL: 'warn', ...env });
}

const prefix = () => `${fileQueuePrefix()}-startfail-${randomBytes(3).toString('hex')}`;

function listenOn(port = 0): Promise<Server> {
  return new Promise((resolve, reject) => {
    const server = createServer((socket) => socket.destroy());
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve(server));
  });
}

describe('opspad start failing for real', () => {
  let taken: Server;
  let takenPort: string;
  let restricted: { url: string; drop(): Promise<void> };

  beforeAll(async () => {
    taken = await listenOn();
    takenPort = String((taken.address() as { port: number }).port);
    // A database its user may connect to but not create tables in.
    // Named under the run's database, so the run's teardown drops both if this file is killed.
    const name = `${inject('templateDatabase')}_nocreate_${randomBytes(4).toString('hex')}`;
    const admin = new pg.Client({ connectionString: fileDatabaseUrl() });
    await admin.connect();
    await admin.query(`CREATE ROLE ${name} LOGIN`);
    await admin.query(`CREATE DATABASE ${name}`);
    await admin.end();
    const url = new URL(fileDatabaseUrl());
    url.username = name;
    url.pathname = `/${name}`;
    restricted = {
      url: url.toString(),
      async drop() {
        const dropper = new pg.Client({ connectionString: fileDatabaseUrl() });
        await dropper.connect();
        try {
          await dropper.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
          await dropper.query(`DROP ROLE IF EXISTS ${name}`);
        } finally {
          await dropper.end();
        }
      },
    };
  });

  afterAll(async () => {
    await new Promise<void>((resolve) => taken.close(() => resolve()));
    await restricted.drop();
  });

  const services = () => ({
    DATABASE_URL: fileDatabaseUrl(),
    REDIS_URL: inject('redisUrl'),
    OPSPAD_QUEUE_PREFIX: prefix(),
    PORT: '0',
  });

  it('at Redis, when REDIS_URL does not answer', async () => {
    const failed = await run([BIN, 'start'], { ...services(), REDIS_URL: 'redis://127.0.0.1:1' });
    expect(failed.code, failed.stderr).toBe(1);
    expect(failed.stderr).toMatch(
      /^opspad start: failed at Redis: Redis at redis:\/\/127\.0\.0\.1:1\/? is not reachable .*\. Start it \(e\.g\. redis-server\), or set REDIS_URL to one that runs, or unset both to keep the jobs in Postgres\.\n$/,
    );
  });

  it('at database, when DATABASE_URL does not answer', async () => {
    const failed = await run([BIN, 'start'], {
      ...services(),
      DATABASE_URL: 'postgres://postgres:not-shown@127.0.0.1:1/opspad',
    });
    expect(failed.code, failed.stderr).toBe(1);
    expect(failed.stderr).toBe(
      'opspad start: failed at database: Postgres at 127.0.0.1:1 (DATABASE_URL) refused the connection. Check that Postgres runs there and that DATABASE_URL names its host and port, or unset DATABASE_URL to use the embedded database.\n',
    );
  });

  it('at migrations, when the database user may not create tables', async () => {
    const failed = await run([BIN, 'start'], { ...services(), DATABASE_URL: restricted.url });
    expect(failed.code, failed.stderr).toBe(1);
    const database = new URL(restricted.url).pathname.slice(1);
    expect(failed.stderr).toBe(
      `opspad start: failed at migrations: the user in DATABASE_URL may not create opspad's tables in database "${database}" (permission denied for database ${database}). Make it the database's owner (\`ALTER DATABASE "${database}" OWNER TO <that user>\`), or put a user who owns the database in DATABASE_URL.\n`,
    );
  });

  it('at handlers, when a module named in OPSPAD_HANDLERS throws while it loads', async () => {
    const failed = await run([BIN, 'start'], { ...services(), OPSPAD_HANDLERS: THROWING_HANDLER });
    expect(failed.code, failed.stderr).toBe(1);
    expect(failed.stderr).toBe(
      `opspad start: failed at handlers: OPSPAD_HANDLERS: loading ${THROWING_HANDLER} failed: the SMS client needs SMS_API_TOKEN. Fix what it names, then start it again.\n`,
    );
  });

  it('before opening anything, when the port is taken: not one connection to Postgres or Redis', async () => {
    let connections = 0;
    const counter = createServer((socket) => {
      connections += 1;
      socket.destroy();
    });
    await new Promise<void>((resolve) => counter.listen(0, '127.0.0.1', resolve));
    const counted = (counter.address() as { port: number }).port;
    try {
      const failed = await run([BIN, 'start'], {
        DATABASE_URL: `postgres://127.0.0.1:${counted}/opspad`,
        REDIS_URL: `redis://127.0.0.1:${counted}`,
        PORT: takenPort,
      });
      expect(failed.code, failed.stderr).toBe(1);
      expect(failed.stderr).toBe(
        `opspad start: PORT ${takenPort} on 127.0.0.1 is in use by another process. Stop that process, or set PORT to a free port.\n`,
      );
      expect(connections).toBe(0);
    } finally {
      await new Promise<void>((resolve) => counter.close(() => resolve()));
    }
  });

  it('at handlers before opening the database: not one connection to Postgres', async () => {
    let connections = 0;
    const counter = createServer((socket) => {
      connections += 1;
      socket.destroy();
    });
    await new Promise<void>((resolve) => counter.listen(0, '127.0.0.1', resolve));
    const counted = (counter.address() as { port: number }).port;
    try {
      const failed = await run([BIN, 'start'], {
        DATABASE_URL: `postgres://127.0.0.1:${counted}/opspad`,
        OPSPAD_QUEUE_BACKEND: 'postgres',
        OPSPAD_HANDLERS: THROWING_HANDLER,
        PORT: '0',
      });
      expect(failed.code, failed.stderr).toBe(1);
      expect(failed.stderr).toMatch(/^opspad start: failed at handlers: OPSPAD_HANDLERS: loading /);
      expect(connections).toBe(0);
    } finally {
      await new Promise<void>((resolve) => counter.close(() => resolve()));
    }
  });

  it('before opening the embedded database, when the port is taken: its folder is not created', async () => {
    const parent = mkdtempSync(join(tmpdir(), 'opspad-startfail-'));
    try {
      const failed = await run([BIN, 'start'], { OPSPAD_DATA_DIR: join(parent, 'data'), PORT: takenPort });
      expect(failed.code, failed.stderr).toBe(1);
      expect(failed.stderr).toMatch(/^opspad start: PORT \d+ on 127\.0\.0\.1 is in use by another process\. /);
      expect(readdirSync(parent)).toEqual([]);
    } finally {
      rmSync(parent, { recursive: true, force: true });
    }
  });

  it('at handlers on the embedded database, closing PGlite, its queue and the control socket', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'opspad-startfail-'));
    try {
      const failed = await run([BIN, 'start'], {
        OPSPAD_DATA_DIR: dataDir,
        PORT: '0',
        OPSPAD_HANDLERS: THROWING_HANDLER,
      });
      expect(failed.code, failed.stderr).toBe(1);
      expect(failed.stderr).toMatch(/^opspad start: failed at handlers: OPSPAD_HANDLERS: loading /);
      // The control socket went with it: the next start is not told another process holds the database.
      expect(readdirSync(dataDir)).not.toContain('control.sock');
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});

describe('createOpspad failing at each of its steps', () => {
  it('names the steps in the order they run', () => {
    expect(START_STEPS).toEqual([
      'handlers',
      'database',
      'migrations',
      'database watch',
      'tracing',
      'queue backend',
      'queues',
      'HTTP server',
      'metrics server',
      'reorganize worker',
      'reorganize schedule',
      'workers',
      'reconciler',
    ]);
  });

  for (const queue of ['redis', 'postgres'] as const) {
    it(`rejects naming each step and leaves nothing open, the jobs in ${queue === 'redis' ? 'Redis' : 'Postgres'}`, {
      timeout: 240_000,
    }, async () => {
      const env = {
        DATABASE_URL: fileDatabaseUrl(),
        ...(queue === 'redis' ? { REDIS_URL: inject('redisUrl') } : { OPSPAD_QUEUE_BACKEND: 'postgres' }),
        OPSPAD_QUEUE_PREFIX: prefix(),
        PORT: '0',
        // A metrics port of its own, so the metrics server's step runs (and fails) too.
        OPSPAD_METRICS_PORT: '0',
      };
      for (const step of START_STEPS) {
        const failed = await run([FAILING_AT, step], env);
        expect(failed, step).toMatchObject({
          code: 1,
          stdout: '',
          stderr: `StartFailedError: opspad start failed at ${step}: injected failure\n`,
        });
      }
    });
  }
});
