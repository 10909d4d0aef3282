/**
 * The Postgres queue backend on the run's Postgres server, as several opspad processes see it
 * (each backend here stands for one process): the pause/cancel control channel over
 * LISTEN/NOTIFY, also after its connection is cut; the request counter shared between processes
 * and exact under concurrency; migrations that many processes may race; one pool and one LISTEN
 * connection per process, all closed at the end; the reorganization sweep's job scheduler, which
 * the reconciler puts back after the queue lost it; and the per-key request limit across two API
 * processes with no Redis.
 */
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, describe, expect, inject, it } from 'vitest';
import type { QueueBackend } from '../../src/queue/backend.ts';
import type { StopMessage } from '../../src/queue/control-channel.ts';
import { createPostgresQueueBackend } from '../../src/queue/postgres-backend.ts';
import { harnessPrefix, startHarness } from '../helpers/harness.ts';
import { loseEveryJob } from '../helpers/queue.ts';
import { eventually } from '../helpers/wait.ts';

const opened: QueueBackend[] = [];
const admin = new pg.Client({ connectionString: inject('databaseUrl') });
let adminConnected: Promise<unknown> | undefined;

async function adminQuery<R extends pg.QueryResultRow>(text: string, params: unknown[] = []): Promise<R[]> {
  adminConnected ??= admin.connect();
  await adminConnected;
  return (await admin.query<R>(text, params)).rows;
}

async function backend(prefix: string, poolSize = 4) {
  const created = await createPostgresQueueBackend({
    engine: 'postgres',
    connectionString: inject('databaseUrl'),
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
    const harness = await startHarness('postgres', {
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

  it('limits requests per key across two API processes with the jobs in Postgres and no Redis', async () => {
    const prefix = harnessPrefix();
    const env = { OPSPAD_RATE_LIMIT: '4/1m', OPSPAD_QUEUE_PREFIX: prefix };
    const first = await startHarness('postgres', { queue: 'postgres', env });
    const second = await startHarness('postgres', { queue: 'postgres', env });
    try {
      expect(first.service.queueBackend.kind).toBe('postgres');
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
