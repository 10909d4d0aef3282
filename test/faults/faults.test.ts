/**
 * Fault injection with real processes: worker processes SIGKILLed again and again, Redis stopped
 * and restarted (and flushed), Postgres connections cut, a batch delivered twice, a frozen worker
 * whose lease is taken over. Each scenario runs on a database and a Redis prefix of its own and
 * ends with the same audit: every item in exactly one final state, the counters equal to the
 * rows, nothing recorded twice. Each prints one line:
 * `scenario items kills/restarts lost=0 duplicates=0 seconds`.
 */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, afterEach, describe, expect, inject, it } from 'vitest';
import type { QueueBackendKind } from '../../src/config/env.ts';
import { closeCountingClient, countingHandler, sideEffects } from '../fixtures/counting-handler.ts';
import { adminClient, copyRunDatabase } from '../helpers/file-database.ts';
import {
  type Harness,
  harnessPrefix,
  ids,
  QUEUE_BACKENDS,
  queueEnv,
  startHarness,
  type Tenant,
} from '../helpers/harness.ts';
import { ITEM_STATES } from '../helpers/item-states.ts';
import { type PrivateRedis, startPrivateRedis } from '../helpers/private-redis.ts';
import { killAllChildren, type Spawned, startWorker } from '../helpers/processes.ts';
import { testKey } from '../helpers/redis.ts';
import { eventually } from '../helpers/wait.ts';

const RUN_TIMEOUT_MS = 180_000;

// ─── Fresh resources per scenario ──────────────────────────────────────────────────────────────

const cleanups: (() => Promise<void>)[] = [];

afterEach(async () => {
  await killAllChildren();
  for (const cleanup of cleanups.splice(0).reverse()) {
    await cleanup().catch(() => undefined);
  }
});
afterAll(() => closeCountingClient());

/** A database of the scenario's own, migrated, beside the file's; dropped afterwards. */
async function freshDatabase(): Promise<string> {
  const database = await copyRunDatabase('fault');
  cleanups.push(() => database.drop());
  return database.url;
}

/** A private redis-server (see test/helpers/private-redis.ts), stopped after the scenario. */
async function privateRedis(): Promise<PrivateRedis> {
  const redis = await startPrivateRedis();
  cleanups.push(redis.stop);
  return redis;
}

interface Scenario {
  harness: Harness;
  tenant: Tenant;
  databaseUrl: string;
  redisUrl: string;
  prefix: string;
  sidefx: string;
  workers: Spawned[];
  startWorkers(count: number, env?: Record<string, string>): Promise<void>;
}

/**
 * An API (in this process, no workers) and `workers` worker processes on fresh resources, the
 * jobs in Redis (the run's, or `redisUrl`) or, with `queue` postgres, in the scenario's database.
 */
async function scenario(options: { redisUrl?: string; queue?: QueueBackendKind } = {}): Promise<Scenario> {
  const databaseUrl = await freshDatabase();
  const queue = options.queue ?? 'redis';
  const redisUrl = options.redisUrl ?? inject('redisUrl');
  const queueSettings = queue === 'redis' ? { REDIS_URL: redisUrl } : queueEnv('postgres');
  const prefix = harnessPrefix();
  const harness = await startHarness('postgres', {
    databaseUrl,
    queue,
    handlers: [countingHandler],
    env: { ...queueSettings, OPSPAD_QUEUE_PREFIX: prefix },
  });
  cleanups.push(() => harness.close());
  const tenant = await harness.newTenant();
  const workers: Spawned[] = [];
  let started = 0;
  return {
    harness,
    tenant,
    databaseUrl,
    redisUrl,
    prefix,
    sidefx: testKey('sidefx'),
    workers,
    async startWorkers(count, env = {}) {
      for (let i = 0; i < count; i++) {
        workers.push(
          await startWorker(
            `worker-${++started}`,
            prefix,
            { DATABASE_URL: databaseUrl, ...queueSettings, SIDEFX_REDIS_URL: inject('redisUrl'), ...env },
            queue,
          ),
        );
      }
    },
  };
}

/**
 * SIGSTOPs `worker` while it holds a leased batch of `operationId`, and returns the items it
 * holds. Between two batches a worker holds nothing, so it is woken and stopped again until it
 * does (50 tries at most). A statement it sent before it stopped still runs, and commits, in
 * Postgres (one call records a batch and leases the next): what it holds is read once none is
 * left, or a batch its own record was finishing would be counted as held (CI saw one).
 */
async function freezeHoldingBatch(s: Scenario, worker: Spawned, operationId: string): Promise<{ item_id: string }[]> {
  const heldNow = () =>
    s.harness.db.query<{ item_id: string }>(
      `SELECT item_id FROM (${ITEM_STATES}) i WHERE operation_id = $1 AND status = 'leased'`,
      [operationId],
    );
  const stepsInFlight = async () => {
    const rows = await s.harness.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_stat_activity
       WHERE datname = current_database() AND pid <> pg_backend_pid() AND state = 'active'
         AND query ~ 'opspad_(record|lease)'`,
    );
    return rows[0]?.n ?? 0;
  };
  let held: { item_id: string }[] = [];
  for (let attempt = 0; attempt < 50 && held.length === 0; attempt++) {
    worker.process.kill('SIGSTOP');
    await eventually(async () => ((await stepsInFlight()) === 0 ? true : undefined), {
      what: "the stopped worker's statements to end",
    });
    held = await heldNow();
    if (held.length === 0) {
      worker.process.kill('SIGCONT');
      await eventually(async () => ((await heldNow()).length > 0 ? true : undefined), { what: 'a leased batch' });
    }
  }
  return held;
}

async function createCounting(s: Scenario, items: number, queryParams: Record<string, unknown> = {}) {
  const created = await s.tenant.op(randomUUID(), {
    action: 'create',
    operation_type: 'counting',
    total_items: items,
    item_ids: ids(items, 'item'),
    batch_size: 50,
    max_parallel_batches: 8,
    query_params: { sidefx_key: s.sidefx, latency_ms: 2, ...queryParams },
  });
  expect(created.status, JSON.stringify(created.body)).toBe(200);
  return created.body.operation_id as string;
}

/** Polls the database (not the API: the fault may be cutting it) until the operation ends. */
async function waitForEnd(s: Scenario, operationId: string): Promise<void> {
  await eventually(
    async () => {
      const rows = await s.harness.db
        .query<{ status: string }>('SELECT status FROM assistant_operation WHERE id = $1', [operationId])
        .catch(() => []);
      return rows[0]?.status === 'completed' ? true : undefined;
    },
    { timeoutMs: RUN_TIMEOUT_MS, intervalMs: 200, what: 'the operation to complete' },
  ).catch(async (error: unknown) => {
    // What the workers said is the first thing anyone debugging this will want.
    const [state] = await s.harness.db.query(
      `SELECT status, completed_count, failed_count, state_json FROM assistant_operation WHERE id = $1`,
      [operationId],
    );
    const queue = s.harness.service.dispatcher.queues.find((q) => q.name === 'batches-counting');
    const jobs = await queue?.getJobCounts('waiting', 'active', 'delayed', 'completed', 'failed').catch(() => ({}));
    const logs = s.workers.map((w) => `--- ${w.name}\n${w.lines.slice(-15).join('\n')}\n${w.stderr().slice(-1500)}`);
    throw new Error(
      `${(error as Error).message}\noperation: ${JSON.stringify(state)}\njobs: ${JSON.stringify(jobs)}\n${logs.join('\n')}`,
    );
  });
}

async function recordedSoFar(s: Scenario, operationId: string): Promise<number> {
  const rows = await s.harness.db
    .query<{ n: number }>('SELECT completed_count + failed_count AS n FROM assistant_operation WHERE id = $1', [
      operationId,
    ])
    .catch(() => [{ n: 0 }]);
  return rows[0]?.n ?? 0;
}

/**
 * The audit every scenario ends with. Lost: items not in a final state. Duplicates: items the
 * audit trail recorded more than once (the batch_recorded events add up to more than the rows).
 */
async function audit(s: Scenario, operationId: string, items: number) {
  const [op] = await s.harness.db.query<{
    status: string;
    total_items: number;
    completed_count: number;
    failed_count: number;
  }>('SELECT status, total_items, completed_count, failed_count FROM assistant_operation WHERE id = $1', [operationId]);
  const states = await s.harness.db.query<{ status: string; n: number }>(
    'SELECT status, count(*)::int AS n FROM assistant_operation_item WHERE operation_id = $1 GROUP BY status',
    [operationId],
  );
  const byState = Object.fromEntries(states.map((r) => [r.status, r.n]));
  const [events] = await s.harness.db.query<{ recorded: number }>(
    `SELECT coalesce(sum((data->>'completed')::int + (data->>'failed')::int), 0)::int AS recorded
     FROM operation_event WHERE operation_id = $1 AND kind = 'batch_recorded'`,
    [operationId],
  );
  const finalRows = (byState.completed ?? 0) + (byState.failed ?? 0);
  const lost = items - finalRows;
  const duplicates = (events?.recorded ?? 0) - finalRows;
  expect(op).toMatchObject({ status: 'completed', total_items: items });
  expect(op?.completed_count).toBe(byState.completed ?? 0);
  expect(op?.failed_count).toBe(byState.failed ?? 0);
  expect(Object.keys(byState).sort()).toEqual(expect.arrayContaining(['completed']));
  expect(byState.pending ?? 0).toBe(0);
  expect(byState.leased ?? 0).toBe(0);
  expect(byState.abandoned ?? 0).toBe(0);
  expect(lost).toBe(0);
  expect(duplicates).toBe(0);
  const effects = await sideEffects(s.sidefx);
  const rehandled = [...effects.values()].filter((count) => count > 1).length;
  return { lost, duplicates, rehandled };
}

function report(
  name: string,
  items: number,
  faults: string,
  result: { lost: number; duplicates: number; rehandled: number },
  started: number,
) {
  const seconds = ((Date.now() - started) / 1000).toFixed(1);
  process.stdout.write(
    `FAULT ${name.padEnd(22)} items=${items} ${faults} lost=${result.lost} duplicates=${result.duplicates} rehandled=${result.rehandled} seconds=${seconds}\n`,
  );
}

// ─── Scenarios ────────────────────────────────────────────────────────────────────────────────

describe('fault injection', () => {
  it.each(QUEUE_BACKENDS)(
    'survives repeated SIGKILLs of worker processes (%s queue, 3 workers, at least 5 kills, 20,000 items)',
    async (queue) => {
      const started = Date.now();
      const s = await scenario({ queue });
      await s.startWorkers(3);
      // ~10 ms an item keeps the run long enough for every kill to land mid-operation.
      const operationId = await createCounting(s, 20_000, { latency_ms: 10 });
      const replacements: Promise<void>[] = [];
      let kills = 0;
      // A kill every 2,000 recorded items: 5 to 9 kills, each in the middle of some batches.
      for (let mark = 1500; mark < 20_000 && kills < 9; mark += 2000) {
        const reached = await eventually(
          async () => ((await recordedSoFar(s, operationId)) >= mark ? true : undefined),
          {
            timeoutMs: RUN_TIMEOUT_MS,
            what: `${mark} items recorded`,
          },
        );
        if (!reached || (await recordedSoFar(s, operationId)) >= 20_000) {
          break;
        }
        const victim = s.workers.find((w) => w.exit === undefined);
        if (!victim) {
          continue;
        }
        victim.process.kill('SIGKILL');
        await victim.waitForExit();
        kills++;
        // The replacement starts in the background: the others keep working meanwhile.
        replacements.push(s.startWorkers(1));
      }
      await Promise.all(replacements);
      await waitForEnd(s, operationId);
      expect(kills).toBeGreaterThanOrEqual(5);
      const result = await audit(s, operationId, 20_000);
      report(
        queue === 'redis' ? 'sigkill_workers' : 'sigkill_workers_pgqueue',
        20_000,
        `kills=${kills}`,
        result,
        started,
      );
    },
  );

  it('survives Redis stopping, starting again empty, and being flushed mid-operation', async () => {
    const started = Date.now();
    const redis = await privateRedis();
    const s = await scenario({ redisUrl: redis.url });
    await s.startWorkers(2);
    const operationId = await createCounting(s, 6000, { latency_ms: 3 });
    let restarts = 0;
    for (const threshold of [1000, 3000]) {
      await eventually(async () => ((await recordedSoFar(s, operationId)) >= threshold ? true : undefined), {
        timeoutMs: RUN_TIMEOUT_MS,
        what: `${threshold} items recorded`,
      });
      await redis.stop();
      await new Promise((resolve) => setTimeout(resolve, 1500)); // the outage itself: workers must ride it out
      await redis.start();
      restarts++;
    }
    await eventually(async () => ((await recordedSoFar(s, operationId)) >= 4500 ? true : undefined), {
      timeoutMs: RUN_TIMEOUT_MS,
      what: '4500 items recorded',
    });
    const flusher = new Redis(redis.url);
    await flusher.flushall();
    flusher.disconnect();
    restarts++;
    await waitForEnd(s, operationId);
    const result = await audit(s, operationId, 6000);
    report('redis_restart_flush', 6000, `restarts=${restarts}`, result, started);
  });

  // With the jobs in Postgres, the cuts hit the queue as well: BullMQ's pool and LISTEN connection,
  // and the fair share's transactions (a cut one once crashed its worker: its client's 'error'
  // was unheard; both workers gone, the run stalled with 8 jobs left active).
  it.each(QUEUE_BACKENDS)(
    'survives its Postgres connections being cut again and again for several seconds (%s queue)',
    async (queue) => {
      const started = Date.now();
      const s = await scenario({ queue });
      await s.startWorkers(2);
      const operationId = await createCounting(s, 6000, { latency_ms: 3 });
      await eventually(async () => ((await recordedSoFar(s, operationId)) >= 500 ? true : undefined), {
        timeoutMs: RUN_TIMEOUT_MS,
        what: '500 items recorded',
      });
      const database = new URL(s.databaseUrl).pathname.slice(1);
      const admin = await adminClient();
      let cuts = 0;
      const until = Date.now() + 5000;
      while (Date.now() < until) {
        const result = await admin.query(
          'SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()',
          [database],
        );
        cuts += Number(result.rows[0]?.n ?? 0);
        await new Promise((resolve) => setTimeout(resolve, 250)); // the cadence of the cuts
      }
      await admin.end();
      await waitForEnd(s, operationId);
      const result = await audit(s, operationId, 6000);
      expect(cuts).toBeGreaterThan(0);
      report(
        queue === 'redis' ? 'postgres_cut' : 'postgres_cut_pgqueue',
        6000,
        `connections_cut=${cuts}`,
        result,
        started,
      );
    },
  );

  it.each(QUEUE_BACKENDS)(
    'records a batch delivered twice (a frozen worker and its job retried) once, and a replayed update once (%s queue)',
    async (queue) => {
      const started = Date.now();
      const s = await scenario({ queue });
      // Long batches, so the freeze lands mid-batch; a short job lock, so BullMQ redelivers it.
      await s.startWorkers(1, { OPSPAD_JOB_LOCK_TTL: '1s', OPSPAD_LEASE_TTL: '60s' });
      const operationId = await createCounting(s, 400, { latency_ms: 40 });
      const frozen = s.workers[0] as Spawned;
      await eventually(async () => ((await recordedSoFar(s, operationId)) >= 50 ? true : undefined), {
        timeoutMs: RUN_TIMEOUT_MS,
        what: 'the first batches',
      });
      // Frozen mid-batch: between two batches (on the Postgres queue, most of the time) it holds
      // nothing, and no batch would be delivered twice.
      expect(await freezeHoldingBatch(s, frozen, operationId)).not.toEqual([]);
      // Another worker: BullMQ sees the frozen one's jobs stall and delivers them again (same job
      // ids, so the same lease owners: they get the very batches the frozen worker holds).
      await s.startWorkers(1, { OPSPAD_JOB_LOCK_TTL: '1s', OPSPAD_LEASE_TTL: '60s' });
      await eventually(async () => ((await recordedSoFar(s, operationId)) >= 250 ? true : undefined), {
        timeoutMs: RUN_TIMEOUT_MS,
        what: 'the second worker taking over',
      });
      frozen.process.kill('SIGCONT'); // it wakes up and reports the batches it was handling
      await waitForEnd(s, operationId);

      // A replayed update changes nothing.
      const conversation = (
        await s.harness.db.query<{ conversation_id: string }>(
          'SELECT conversation_id FROM assistant_operation WHERE id = $1',
          [operationId],
        )
      )[0]?.conversation_id as string;
      const replay = await s.tenant.op(conversation, {
        action: 'update',
        operation_id: operationId,
        completed_ids: ['item-1', 'item-2'],
      });
      expect(replay.status).toBe(409); // the operation is completed: its results can no longer change
      const result = await audit(s, operationId, 400);
      report(
        queue === 'redis' ? 'duplicate_delivery' : 'duplicate_delivery_pgqueue',
        400,
        'freezes=1 replays=1',
        result,
        started,
      );
    },
  );

  it.each(QUEUE_BACKENDS)(
    'never lets a late worker overwrite the result of the worker that took its lease over (%s queue)',
    async (queue) => {
      const started = Date.now();
      const s = await scenario({ queue });
      // No heartbeat can save a frozen process: its leases expire and another lane takes the items.
      const settings = { OPSPAD_LEASE_TTL: '1s', OPSPAD_JOB_LOCK_TTL: '30s' };
      await s.startWorkers(1, settings);
      // Every fifth item fails, with the pid of the process that handled it in the reason.
      const itemIds = ids(300, 'item').map((id, i) => (i % 5 === 0 ? `fail-${i}` : id));
      const created = await s.tenant.op(randomUUID(), {
        action: 'create',
        operation_type: 'counting',
        total_items: itemIds.length,
        item_ids: itemIds,
        batch_size: 25,
        // More lanes than the frozen worker runs (4 at a time): the others go on and take its items.
        max_parallel_batches: 8,
        query_params: { sidefx_key: s.sidefx, latency_ms: 30 },
      });
      const operationId = created.body.operation_id as string;
      const late = s.workers[0] as Spawned;
      await eventually(async () => ((await recordedSoFar(s, operationId)) >= 25 ? true : undefined), {
        timeoutMs: RUN_TIMEOUT_MS,
        what: 'the first batches',
      });
      const held = await freezeHoldingBatch(s, late, operationId);
      await s.startWorkers(1, settings);
      const taker = s.workers[1] as Spawned;
      await waitForEnd(s, operationId);
      const rows = () =>
        s.harness.db.query<{ item_id: string; status: string; reason: string | null }>(
          'SELECT item_id, status, reason FROM assistant_operation_item WHERE operation_id = $1 ORDER BY ordinal',
          [operationId],
        );
      const before = await rows();
      // The late worker wakes up, finishes its handlers and reports; its jobs then end.
      late.process.kill('SIGCONT');
      const batches = s.harness.service.dispatcher.queues.find((q) => q.name === 'batches-counting');
      // A job of the late worker whose lock ran out while it was frozen ends only once a worker's
      // stalled-job check (every 30 s) has moved it and it has run again: up to a minute, so the
      // wait allows more.
      await eventually(async () => ((await batches?.getActiveCount()) === 0 ? true : undefined), {
        timeoutMs: 150_000,
        what: "the late worker's jobs to end",
      });
      expect(await rows()).toEqual(before);
      // The items the frozen worker held were handled and recorded by the one that took over.
      const heldFailures = before.filter((r) => r.status === 'failed' && held.some((h) => h.item_id === r.item_id));
      expect(held.length).toBeGreaterThan(0);
      for (const row of heldFailures) {
        expect(row.reason).toContain(`pid ${taker.process.pid}`);
      }
      const result = await audit(s, operationId, itemIds.length);
      report(
        queue === 'redis' ? 'late_worker_lease' : 'late_worker_lease_pgqueue',
        itemIds.length,
        `freezes=1 taken_over=${held.length}`,
        result,
        started,
      );
    },
  );
});
