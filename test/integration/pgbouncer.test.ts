/**
 * opspad behind PgBouncer in transaction mode (test/helpers/pgbouncer.ts), as docs/deployment.md
 * describes it: DATABASE_URL through the pooler, DATABASE_DIRECT_URL
 * to the server. What a transaction pooler breaks is shown first — a session advisory lock that
 * a second client also "gets", startup parameters it refuses — then that opspad on a fresh
 * database migrates, runs background operations with exact counts, pauses and resumes them, with
 * the jobs in Redis and in Postgres, its transactions counted by PgBouncer; and that the
 * reconciler's lock, on the direct connection, still lets one process in at a time.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { loadConfig, type QueueBackendKind } from '../../src/config/env.ts';
import { createLogger } from '../../src/logger.ts';
import { createOpspad, type Opspad } from '../../src/main.ts';
import { createApiKey, createPostgresDatabase } from '../../src/store/index.ts';
import { closeCountingClient, countingHandler, sideEffects } from '../fixtures/counting-handler.ts';
import { fileDatabaseUrl } from '../helpers/file-database.ts';
import { harnessPrefix, ids, QUEUE_BACKENDS, queueEnv, type Tenant } from '../helpers/harness.ts';
import {
  DEFAULT_PGBOUNCER,
  PGBOUNCER_SETUP_TIMEOUT_MS,
  type PgBouncerUnderTest,
  pgBouncerPlan,
  startPgBouncer,
} from '../helpers/pgbouncer.ts';
import { testKey } from '../helpers/redis.ts';
import { finished, waitForProgress } from '../helpers/wait.ts';

const LOCK_DEMO = 'opspad_lock_demo';
let bouncer: PgBouncerUnderTest | undefined;
const databases: string[] = [];
const services: Opspad[] = [];
const cleanups: (() => Promise<void>)[] = [];

/** A new empty database beside the run's (no migrations: opspad applies them). */
async function freshDatabase(): Promise<{ name: string; directUrl: string }> {
  // Named after the run's database, so the run's teardown drops it if this file cannot.
  const name = `${inject('templateDatabase')}_pgb_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: fileDatabaseUrl() });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  databases.push(name);
  const url = new URL(fileDatabaseUrl());
  url.pathname = `/${name}`;
  return { name, directUrl: url.toString() };
}

beforeAll(async () => {
  const demo = await freshDatabase();
  // One server connection behind this alias: every client of it shares one server session.
  bouncer = await startPgBouncer(fileDatabaseUrl(), { [LOCK_DEMO]: { database: demo.name, poolSize: 1 } });
}, PGBOUNCER_SETUP_TIMEOUT_MS);

afterEach(async () => {
  for (const service of services.splice(0)) {
    await service.close();
  }
  for (const cleanup of cleanups.splice(0).reverse()) {
    await cleanup();
  }
});

afterAll(async () => {
  closeCountingClient();
  await bouncer?.stop();
  const admin = new pg.Client({ connectionString: fileDatabaseUrl() });
  await admin.connect();
  for (const name of databases) {
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  }
  await admin.end();
});

function through(url: string): string {
  return (bouncer as PgBouncerUnderTest).urlFor(url);
}

async function client(url: string, options: pg.ClientConfig = {}): Promise<pg.Client> {
  const connection = new pg.Client({ connectionString: url, ...options });
  connection.on('error', () => {});
  await connection.connect();
  cleanups.push(() => connection.end().catch(() => undefined));
  return connection;
}

/** PgBouncer's own count of the transactions it passed to `database` (its admin console). */
async function pooledTransactions(database: string): Promise<number> {
  const admin = await client(through(fileDatabaseUrl()).replace(/\/[^/]*$/, '/pgbouncer'));
  const stats = await admin.query<{ database: string; total_xact_count: string }>('SHOW STATS');
  return Number(stats.rows.find((row) => row.database === database)?.total_xact_count ?? 0);
}

describe('what a transaction pooler breaks (PgBouncer, pool_mode = transaction)', () => {
  it('a session advisory lock: a second client on the same server session gets it too', async () => {
    const demoUrl = through(fileDatabaseUrl()).replace(/\/[^/]*$/, `/${LOCK_DEMO}`);
    const [first, second] = [await client(demoUrl), await client(demoUrl)];
    const lock = 'SELECT pg_try_advisory_lock(424242) AS locked';
    expect((await first.query(lock)).rows[0].locked).toBe(true);
    // Between statements the pooler gave the lock's server session to the second client.
    expect((await second.query(lock)).rows[0].locked).toBe(true);
    // A transaction lock lives as long as the transaction, which the pooler keeps on one session.
    await first.query('SELECT pg_advisory_unlock_all()');
    await first.query('BEGIN');
    expect((await first.query('SELECT pg_try_advisory_xact_lock(424243) AS locked')).rows[0].locked).toBe(true);
    const direct = await client(fileDatabaseUrl().replace(/\/[^/]*$/, `/${databases[0]}`));
    expect((await direct.query('SELECT pg_try_advisory_xact_lock(424243) AS locked')).rows[0].locked).toBe(false);
    await first.query('COMMIT');
  });

  it('startup parameters: BullMQ’s search_path option and a session timeout are refused', async () => {
    const url = through(fileDatabaseUrl());
    await expect(client(url, { options: '-c search_path=bullmq_x' })).rejects.toThrow(
      'unsupported startup parameter: options',
    );
    await expect(client(url, { idle_in_transaction_session_timeout: 15_000 })).rejects.toThrow(
      'unsupported startup parameter: idle_in_transaction_session_timeout',
    );
  });
});

describe.each(QUEUE_BACKENDS)(
  'opspad behind PgBouncer with DATABASE_DIRECT_URL (%s queue)',
  (queue: QueueBackendKind) => {
    it('migrates a fresh database, runs background operations to exact counts, pauses and resumes', {
      timeout: 120_000,
    }, async () => {
      const { name, directUrl } = await freshDatabase();
      const config = loadConfig({
        PORT: '0',
        HOST: '127.0.0.1',
        OPSPAD_LOG_LEVEL: 'silent',
        DATABASE_URL: through(directUrl),
        DATABASE_DIRECT_URL: directUrl,
        ...queueEnv(queue),
        OPSPAD_QUEUE_PREFIX: harnessPrefix(),
        OPSPAD_REORGANIZE_INTERVAL: '24h',
        OPSPAD_RECONCILE_INTERVAL: '500ms',
      });
      const service = await createOpspad({ config, logger: createLogger('silent'), handlers: [countingHandler] });
      services.push(service);
      const before = await pooledTransactions(name);

      const checks = createPostgresDatabase({ connectionString: directUrl, poolSize: 1 });
      cleanups.push(() => checks.close());
      const created = await createApiKey(checks, `org-${randomUUID()}`);
      const headers = { authorization: `Bearer ${created.api_key}`, 'content-type': 'application/json' };
      const tenant = { apiKey: created.api_key } as Tenant;
      const conversation = randomUUID();
      const op = async (input: Record<string, unknown>) => {
        const response = await fetch(
          `${service.url}/v1/conversations/${conversation}/tools/manage_assistant_operation`,
          {
            method: 'POST',
            headers,
            body: JSON.stringify(input),
          },
        );
        return { status: response.status, body: (await response.json()) as Record<string, unknown> };
      };

      const items = 600;
      const sidefx = testKey('sidefx');
      const createdOp = await op({
        action: 'create',
        operation_type: 'counting',
        total_items: items,
        item_ids: ids(items, 'item'),
        batch_size: 10,
        max_parallel_batches: 2,
        // 10 ms an item over 2 lanes: about 3 s in all, so the pause lands mid-run.
        query_params: { sidefx_key: sidefx, latency_ms: 10 },
      });
      expect(createdOp.status, JSON.stringify(createdOp.body)).toBe(200);
      const operationId = createdOp.body.operation_id as string;

      await waitForProgress(service.url as string, tenant, operationId, (p) => p.completed_count >= 50 || finished(p));
      expect((await op({ action: 'pause', operation_id: operationId })).status).toBe(200);
      const held = await waitForProgress(
        service.url as string,
        tenant,
        operationId,
        (p) => (p.status === 'paused' && p.in_flight_count === 0) || finished(p),
      );
      expect(held.status).toBe('paused');
      expect((await op({ action: 'resume', operation_id: operationId })).status).toBe(200);
      const end = await waitForProgress(service.url as string, tenant, operationId, finished);
      expect(end).toMatchObject({ status: 'completed', completed_count: items, failed_count: 0, in_flight_count: 0 });

      const states = await checks.query<{ status: string; n: number }>(
        'SELECT status, count(*)::int AS n FROM assistant_operation_item WHERE operation_id = $1 GROUP BY status',
        [operationId],
      );
      expect(states).toEqual([{ status: 'completed', n: items }]);
      const effects = await sideEffects(sidefx);
      expect(effects.size).toBe(items);
      expect([...effects.values()].every((count) => count === 1)).toBe(true);
      // opspad's own transactions (leases, records, the create) went through the pooler.
      expect((await pooledTransactions(name)) - before).toBeGreaterThan(items / 10);
    });
  },
);

describe('the reconciler’s lock behind PgBouncer', () => {
  it('lets one process in at a time: it is taken on the direct connection', async () => {
    const { directUrl } = await freshDatabase();
    const open = () => {
      const db = createPostgresDatabase({
        connectionString: through(directUrl),
        directConnectionString: directUrl,
        poolSize: 2,
      });
      cleanups.push(() => db.close());
      return db;
    };
    const [first, second] = [open(), open()];
    let release: () => void = () => {};
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    let entered: () => void = () => {};
    const inside = new Promise<void>((resolve) => {
      entered = resolve;
    });
    const firstRun = first.withTryLock(777_001, async () => {
      entered();
      await held;
      return 'first';
    });
    await inside;
    expect(await second.withTryLock(777_001, async () => 'second')).toBeUndefined();
    release();
    expect(await firstRun).toBe('first');
    expect(await second.withTryLock(777_001, async () => 'second')).toBe('second');
  });
});

describe('pgBouncerPlan: the test command sets PgBouncer up on a fresh machine', () => {
  const machine = (present: string[], isRoot: boolean, configured = false) => ({
    path: DEFAULT_PGBOUNCER,
    exists: (path: string) => present.includes(path),
    isRoot,
    configured,
  });
  it('uses it, installs it as root with apt-get, or says what to run', () => {
    expect(pgBouncerPlan(machine([DEFAULT_PGBOUNCER], false))).toEqual({ use: DEFAULT_PGBOUNCER });
    expect(pgBouncerPlan(machine(['/usr/bin/apt-get'], true))).toEqual({
      install: expect.arrayContaining(['install', '-y', 'pgbouncer']),
    });
    expect(pgBouncerPlan(machine(['/usr/bin/apt-get'], false))).toEqual({
      fail: expect.stringContaining('sudo apt-get install -y pgbouncer'),
    });
    expect(pgBouncerPlan(machine(['/usr/bin/apt-get'], true, true))).toEqual({
      fail: expect.stringContaining('OPSPAD_TEST_PGBOUNCER'),
    });
  });
});
