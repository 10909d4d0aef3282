/**
 * The Postgres queue backend on the run's Postgres server, as several opspad processes see it
 * (each backend here stands for one process): the pause/cancel control channel over
 * LISTEN/NOTIFY, also after its connection is cut; the request counter shared between processes
 * and exact under concurrency; migrations that many processes may race; one pool and one LISTEN
 * connection per process, all closed at the end; the reorganization sweep's job scheduler, which
 * the reconciler puts back after the queue lost it; the capped leases of event streams; the fair
 * share's decision, which must agree with domain/fair-share.ts; and the per-key request limit
 * across two API processes with no Redis.
 */
import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { mayStart } from '../../src/domain/fair-share.ts';
import type { QueueBackend } from '../../src/queue/backend.ts';
import type { StopMessage } from '../../src/queue/control-channel.ts';
import { createPostgresQueueBackend, queuePoolConfig } from '../../src/queue/postgres-backend.ts';
import { fileDatabaseUrl } from '../helpers/file-database.ts';
import { harnessPrefix, startHarness } from '../helpers/harness.ts';
import { loseEveryJob } from '../helpers/queue.ts';
import { inOneRateWindow } from '../helpers/rate-window.ts';
import { eventually } from '../helpers/wait.ts';

const opened: QueueBackend[] = [];
const admin = new pg.Client({ connectionString: fileDatabaseUrl() });
let adminConnected: Promise<unknown> | undefined;

async function adminQuery<R extends pg.QueryResultRow>(text: string, params: unknown[] = []): Promise<R[]> {
  adminConnected ??= admin.connect();
  await adminConnected;
  return (await admin.query<R>(text, params)).rows;
}

async function backend(prefix: string, poolSize = 4) {
  const created = await createPostgresQueueBackend({
    engine: 'postgres',
    connectionString: fileDatabaseUrl(),
    prefix,
    poolSize,
  });
  opened.push(created);
  return created;
}

afterAll(async () => {
  await Promise.all(opened.map((b) => b.close()));
  await admin.end();
});

const stop = (reason: string): StopMessage => ({ operation_id: randomUUID(), reason });

describe('the Postgres queue backend', () => {
  it('tells every process of the deployment, and no other, that an operation stopped', async () => {
    const prefix = harnessPrefix();
    const [api, worker, otherDeployment] = await Promise.all([
      backend(prefix),
      backend(prefix),
      backend(harnessPrefix()),
    ]);
    const heard: StopMessage[] = [];
    const heardElsewhere: StopMessage[] = [];
    const subscription = await worker.control.subscribe((m) => heard.push(m));
    const elsewhere = await otherDeployment.control.subscribe((m) => heardElsewhere.push(m));
    const paused = stop('paused');
    await api.control.publish(paused);
    await eventually(async () => (heard.length > 0 ? true : undefined), { what: 'the stop message' });
    expect(heard).toEqual([paused]);

    // Its LISTEN connection cut (a Postgres restart, a proxy): it listens again on a new one.
    expect(worker.namespace).toMatch(/^bullmq_/);
    const cut = await adminQuery<{ n: number }>(
      `SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity
       WHERE datname = current_database() AND application_name = $1 AND query ILIKE 'LISTEN%'`,
      [applicationName(worker)],
    );
    expect(cut[0]?.n).toBeGreaterThan(0);
    const cancelled = stop('cancelled');
    await eventually(
      async () => {
        await api.control.publish(cancelled);
        return heard.some((m) => m.operation_id === cancelled.operation_id) ? true : undefined;
      },
      { what: 'the stop message after the reconnect', intervalMs: 200 },
    );
    expect(heardElsewhere).toEqual([]);
    await subscription.close();
    await elsewhere.close();
  });

  it('has the server end a transaction its process left open, so a frozen worker frees the queue', async () => {
    const target = {
      engine: 'postgres' as const,
      connectionString: fileDatabaseUrl(),
      prefix: harnessPrefix(),
      poolSize: 2,
    };
    // The backend's own pool (the one its queues and workers are given), as the server sees it.
    const own = await backend(target.prefix, target.poolSize);
    const probe = own.createQueue('idle-probe');
    const pool = probe.opts.connection as unknown as pg.Pool;
    const shown = await pool.query<{ t: string }>('SELECT current_setting($1) AS t', [
      'idle_in_transaction_session_timeout',
    ]);
    await probe.close();
    expect(shown.rows[0]?.t).toBe('15s');
    // What it does, with a short timeout: a session stopped inside a transaction holding a
    // queue-wide advisory lock (as the fair share's and the key limits' transactions take one)
    // is ended, and the lock is free. A waiter gives up after 20 s, so a regression fails fast.
    const frozen = new pg.Pool(queuePoolConfig(target, 1000));
    frozen.on('error', () => {});
    const waiter = new pg.Client({ connectionString: fileDatabaseUrl() });
    const holder = await frozen.connect();
    try {
      const ended = new Promise<Error>((resolve) => holder.on('error', resolve));
      const key = Math.floor(Math.random() * 1e9);
      // One round trip: the session is idle inside the transaction from its answer on.
      await holder.query(`BEGIN; SELECT pg_advisory_xact_lock(${key})`);
      await waiter.connect();
      await waiter.query(`SET lock_timeout = '20s'`);
      await waiter.query('SELECT pg_advisory_lock($1)', [key]);
      expect((await ended).message).toMatch(/idle-in-transaction timeout/);
    } finally {
      holder.release(true);
      await frozen.end();
      await waiter.end();
    }
  });

  it('counts requests per key in fixed windows, exactly under concurrency, shared between processes', async () => {
    const prefix = harnessPrefix();
    const [first, second] = await Promise.all([backend(prefix), backend(prefix)]);
    const key = `ratelimit:${randomUUID()}`;
    const counts = await Promise.all(
      Array.from({ length: 30 }, (_, i) => (i % 2 === 0 ? first : second).counter.increment(key, 100, 60_000)),
    );
    expect([...counts].sort((a, b) => a - b)).toEqual(Array.from({ length: 30 }, (_, i) => i + 1));
    expect(await first.counter.increment(key, 101, 60_000)).toBe(1); // the next window starts over
    // A hit stamped with the older window (a clock behind) counts in the current one.
    expect(await second.counter.increment(key, 100, 60_000)).toBe(2);
    expect(await second.counter.increment(`ratelimit:${randomUUID()}`, 101, 60_000)).toBe(1);
    const [table] = await adminQuery<{ persistence: string }>(
      `SELECT c.relpersistence AS persistence FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
       WHERE n.nspname = $1 AND c.relname = 'opspad_rate_window'`,
      [first.namespace],
    );
    expect(table?.persistence).toBe('u'); // unlogged: no WAL for a counter
  });

  it('migrates once however many processes start at once, and again changes nothing', async () => {
    const prefix = harnessPrefix();
    const backends = await Promise.all(Array.from({ length: 4 }, () => backend(prefix)));
    const schema = backends[0]?.namespace as string;
    const [ledger] = await adminQuery<{ versions: number; rows: number }>(
      `SELECT count(DISTINCT version)::int AS versions, count(*)::int AS rows FROM ${schema}.migration`,
    );
    expect(ledger?.rows).toBe(ledger?.versions);
    await backend(prefix);
    const [after] = await adminQuery<{ rows: number }>(`SELECT count(*)::int AS rows FROM ${schema}.migration`);
    expect(after?.rows).toBe(ledger?.rows);
  });

  it('runs every queue and worker of a process on one pool and one LISTEN connection, closed at the end', async () => {
    const poolSize = 3;
    const own = await backend(harnessPrefix(), poolSize);
    const connections = async () =>
      (
        await adminQuery<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1`,
          [applicationName(own)],
        )
      )[0]?.n ?? 0;
    const names = ['a', 'b', 'c'];
    const queues = names.map((name) => own.createQueue(name));
    let processed = 0;
    let peak = 0;
    const workers = names.map((name) =>
      own.createWorker(
        name,
        async () => {
          processed++;
          peak = Math.max(peak, await connections());
        },
        { concurrency: 4 },
      ),
    );
    for (const queue of queues) {
      queue.on('error', () => {});
    }
    for (const worker of workers) {
      worker.on('error', () => {});
    }
    await Promise.all(workers.map((w) => w.waitUntilReady()));
    await Promise.all(queues.map((q) => q.addBulk(Array.from({ length: 20 }, (_, i) => ({ name: 'x', data: { i } })))));
    await eventually(async () => (processed === 60 ? true : undefined), { what: '60 jobs processed' });
    // Three queues and three workers of concurrency 4; BullMQ's own factory would open a pool
    // and a LISTEN connection for each of the six.
    expect(peak).toBeGreaterThan(0);
    expect(peak).toBeLessThanOrEqual(poolSize + 1);
    await Promise.all([...workers.map((w) => w.close()), ...queues.map((q) => q.close())]);
    await own.close();
    await eventually(async () => ((await connections()) === 0 ? true : undefined), {
      what: 'its connections to close',
    });
  });

  it('runs the reorganization sweep from a job scheduler, again and again', async () => {
    // On an embedded database of its own: a sweep reorganizes the changed pads of every
    // organization, and the file's database is shared with its other tests.
    const harness = await startHarness('pglite', {
      queue: 'postgres',
      workers: true,
      env: { OPSPAD_REORGANIZE_INTERVAL: '300ms' },
    });
    try {
      const queue = harness.service.reorganizeQueue.queue;
      const sweeps = async () =>
        (await queue.getJobs(['completed'])).filter((job) => job.name === 'reorganize-sweep').length;
      // Its delayed jobs come due and run: the worker wakes for them without a NOTIFY.
      await eventually(async () => ((await sweeps()) >= 2 ? true : undefined), { what: 'two sweeps' });
    } finally {
      await harness.close();
    }
  });

  it('gets the job scheduler back from the reconciler after the queue lost it', async () => {
    const harness = await startHarness('postgres', {
      queue: 'postgres',
      workers: true,
      // Not due for a year: no sweep job runs (or could put the scheduler back) during the test.
      env: { OPSPAD_REORGANIZE_CRON: '0 0 1 1 *', OPSPAD_RECONCILE_INTERVAL: '1h' },
    });
    try {
      const queue = harness.service.reorganizeQueue.queue;
      const scheduler = async () =>
        (await queue.getJobSchedulers()).find((found) => found.key === 'reorganize-sweep')?.pattern;
      expect(await scheduler()).toBe('0 0 1 1 *');
      // The pass every process makes at start (which upserts the scheduler too) is over.
      await harness.service.reconciler?.runOnce();
      await loseEveryJob(harness.service.queueBackend, harness.db);
      expect(await scheduler()).toBeUndefined();
      await harness.service.reconciler?.runOnce();
      expect(await scheduler()).toBe('0 0 1 1 *');
    } finally {
      await harness.close();
    }
  });

  it('caps leases per key across processes, exactly under concurrency, and lets them lapse by the database clock', async () => {
    const prefix = harnessPrefix();
    const [first, second] = await Promise.all([backend(prefix), backend(prefix)]);
    const key = `streams:${randomUUID()}`;
    const taken = await Promise.all(
      Array.from({ length: 10 }, (_, i) => (i % 2 === 0 ? first : second).leases.acquire(key, `m${i}`, 60_000, 3)),
    );
    expect(taken.filter(Boolean)).toHaveLength(3);
    const holder = `m${taken.indexOf(true)}`;
    await first.leases.release(key, holder);
    expect(await second.leases.acquire(key, 'late', 60_000, 3)).toBe(true);
    expect(await second.leases.acquire(key, 'later', 60_000, 3)).toBe(false);
    // A lease never renewed (its process died) lapses; a renewed one stays.
    const other = `streams:${randomUUID()}`;
    expect(await first.leases.acquire(other, 'dead', 300, 1)).toBe(true);
    expect(await first.leases.acquire(other, 'next', 300, 1)).toBe(false);
    await eventually(async () => ((await second.leases.acquire(other, 'next', 60_000, 1)) ? true : undefined), {
      what: 'the lease to lapse',
    });
    await second.leases.renew(other, 'next', 60_000);
    expect(await first.leases.acquire(other, 'third', 60_000, 1)).toBe(false);
  });

  it('decides the fair share as mayStart does, and refuses to decide on a view older than the last arrival', async () => {
    const own = await backend(harnessPrefix());
    const ORGS = ['org-a', 'org-b', 'org-c', 'org-d'];
    const state = fc.record({
      workers: fc.array(fc.integer({ min: 1, max: 4 }), { minLength: 1, maxLength: 3 }),
      running: fc.dictionary(fc.constantFrom(...ORGS), fc.integer({ min: 0, max: 4 })),
      waiting: fc.dictionary(fc.constantFrom(...ORGS), fc.integer({ min: 1, max: 6 })),
      weights: fc.dictionary(fc.constantFrom(...ORGS), fc.integer({ min: 1, max: 100 })),
      candidate: fc.constantFrom(...ORGS),
    });
    let run = 0;
    await fc.assert(
      fc.asyncProperty(state, async ({ workers, running, waiting, weights, candidate }) => {
        const type = `prop-${run++}`;
        const store = own.fairShare(type);
        const expiry = Date.now() + 60_000;
        for (const [index, slots] of workers.entries()) {
          await store.heartbeat({ id: `w${index}`, slots }, [], expiry, 0);
        }
        for (const [org, count] of Object.entries(running)) {
          for (let batch = 0; batch < count; batch++) {
            await store.forceStart(`${org} job-${batch}`, org, expiry);
          }
        }
        // A lapsed entry and a lapsed worker are ignored.
        await store.forceStart(`${candidate} long-dead`, candidate, 1);
        await store.heartbeat({ id: 'dead', slots: 100 }, [], 1, 0);
        for (let i = 0; i < 7; i++) {
          await store.announceArrival();
        }
        const request = {
          now: Date.now(),
          organizationId: candidate,
          member: `${candidate} new-job`,
          expiry,
          waiting: Object.entries(waiting).map(([org, lanes]) => [org, lanes, weights[org]] as const),
          weight: weights[candidate],
        };
        expect(await store.acquire({ ...request, arrivals: '6' })).toEqual({ code: -1, arrivals: '7' });
        const { code } = await store.acquire({ ...request, arrivals: '7' });
        const expected = mayStart(
          {
            slots: workers.reduce((sum, slots) => sum + slots, 0),
            running: new Map(Object.entries(running)),
            waiting: new Map(Object.entries(waiting)),
            weights: new Map(Object.entries(weights)),
          },
          candidate,
        );
        expect(code).toBe(expected ? 1 : 0);
        const [entry] = await adminQuery<{ n: number }>(
          `SELECT count(*)::int AS n FROM ${own.namespace}.opspad_fair_running WHERE queue = $1 AND member = $2`,
          [`batches-${type}`, `${candidate} new-job`],
        );
        expect(entry?.n).toBe(expected ? 1 : 0);
      }),
      { numRuns: 40 },
    );
  });

  it('wakes parked jobs longest-parked first, when a batch ends or a worker has idle slots', async () => {
    const own = await backend(harnessPrefix());
    const store = own.fairShare('parking');
    const registration = { id: 'w1', slots: 2 };
    const rows = async (table: string) =>
      (
        await adminQuery<{ n: number }>(
          `SELECT count(*)::int AS n FROM ${own.namespace}.${table} WHERE queue = 'batches-parking'`,
        )
      )[0]?.n;
    await store.heartbeat(registration, [], Date.now() + 60_000, 0);
    await store.park('job-2', 2000);
    await store.park('job-1', 1000);
    await store.park('job-3', 3000);
    await store.forceStart('org-a running', 'org-a', Date.now() + 60_000);
    expect(await store.finish('org-a running')).toBe('job-1');
    expect(await rows('opspad_fair_running')).toBe(0);
    expect(await store.heartbeat(registration, [], Date.now() + 60_000, 5)).toEqual(['job-2', 'job-3']);
    expect(await store.finish('org-a gone')).toBeUndefined();
    expect(await rows('opspad_fair_worker')).toBe(1);
    await store.unregister(registration);
    expect(await rows('opspad_fair_worker')).toBe(0);
  });

  it('limits requests per key across two API processes with the jobs in Postgres and no Redis', async () => {
    const prefix = harnessPrefix();
    const env = { OPSPAD_RATE_LIMIT: '4/1m', OPSPAD_QUEUE_PREFIX: prefix };
    const first = await startHarness('postgres', { queue: 'postgres', env });
    const second = await startHarness('postgres', { queue: 'postgres', env });
    try {
      expect(first.service.queueBackend.kind).toBe('postgres');
      await inOneRateWindow(60_000, async () => {
        const tenant = await first.newTenant();
        const conversation = randomUUID();
        const call = (url: string) =>
          fetch(`${url}/v1/conversations/${conversation}/context`, {
            headers: { authorization: `Bearer ${tenant.apiKey}` },
          });
        const statuses = [];
        for (const url of [first.url, second.url, first.url, second.url]) {
          statuses.push((await call(url)).status);
        }
        expect(statuses).toEqual([200, 200, 200, 200]);
        const refused = await call(second.url);
        expect(refused.status).toBe(429);
        expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
        expect(await refused.json()).toMatchObject({ error: { code: 'rate_limited', details: { limit: 4 } } });
      });
    } finally {
      await first.close();
      await second.close();
    }
  });
});

/** The application name of a backend's connections (one deployment, as pg_stat_activity shows it). */
function applicationName(b: QueueBackend): string {
  return `opspad-queue:${b.namespace}`.slice(0, 63);
}
