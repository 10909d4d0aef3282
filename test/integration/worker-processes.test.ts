/**
 * Workers in real child processes (`node bin/opspad.js worker`), sharing the run's Postgres
 * database and a queue prefix with an in-process API (`startHarness`, no workers of its own),
 * with the jobs in Redis and then in Postgres (no Redis at all for opspad):
 * two processes sharing one operation without handling any item twice, one of them SIGKILLed
 * mid-run with nothing lost, a graceful SIGTERM that leaves nothing leased, and
 * `opspad ops watch` following an operation to its end (and refusing an unknown one).
 *
 * The counting handler (test/fixtures/counting-handler.ts, loaded by the children through
 * OPSPAD_HANDLERS) leaves one HINCRBY per handled item in Redis, so "handled twice" is visible
 * from the test process whichever process did the work.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { QueueBackendKind } from '../../src/config/env.ts';
import { closeCountingClient, countingHandler, sideEffects } from '../fixtures/counting-handler.ts';
import { type Harness, harnessPrefix, ids, QUEUE_BACKENDS, startHarness, type Tenant } from '../helpers/harness.ts';
import { ITEM_STATES } from '../helpers/item-states.ts';
import {
  EXIT_TIMEOUT_MS,
  killAllChildren,
  logMessage,
  RUN_TIMEOUT_MS,
  type Spawned,
  START_TIMEOUT_MS,
  spawnOpspad,
  startWorker,
  within,
} from '../helpers/processes.ts';
import { testKey } from '../helpers/redis.ts';
import { eventually, finished, waitForProgress } from '../helpers/wait.ts';

// ---------------------------------------------------------------------------------------------
// The in-process API, one per test, with a queue prefix of its own the workers share.

const harnesses: Harness[] = [];

async function startApi(
  options: { workers?: boolean; queue?: QueueBackendKind } = {},
): Promise<{ harness: Harness; prefix: string }> {
  const prefix = harnessPrefix();
  const harness = await startHarness('postgres', {
    queue: options.queue ?? 'redis',
    workers: options.workers ?? false,
    handlers: [countingHandler],
    env: { OPSPAD_QUEUE_PREFIX: prefix },
  });
  harnesses.push(harness);
  return { harness, prefix };
}

afterEach(async () => {
  await killAllChildren();
  for (const harness of harnesses.splice(0)) {
    await harness.close();
  }
});

afterAll(() => {
  closeCountingClient();
});

async function createCounting(
  tenant: Tenant,
  conversation: string,
  options: { items: number; batchSize: number; lanes: number; latencyMs: number; sidefx: string },
): Promise<string> {
  const created = await tenant.op(conversation, {
    action: 'create',
    operation_type: 'counting',
    total_items: options.items,
    item_ids: ids(options.items),
    batch_size: options.batchSize,
    max_parallel_batches: options.lanes,
    query_params: { sidefx_key: options.sidefx, latency_ms: options.latencyMs },
  });
  expect(created.status, JSON.stringify(created.body)).toBe(200);
  expect(created.body.execution).toBe('background');
  return created.body.operation_id as string;
}

async function itemStates(harness: Harness, operationId: string): Promise<Record<string, number>> {
  const rows = await harness.db.query<{ status: string; n: number }>(
    `SELECT status, count(*)::int AS n FROM assistant_operation_item WHERE operation_id = $1 GROUP BY status`,
    [operationId],
  );
  return Object.fromEntries(rows.map((row) => [row.status, row.n]));
}

async function itemRows(harness: Harness, operationId: string): Promise<{ rows: number; distinct: number }> {
  const rows = await harness.db.query<{ rows: number; distinct: number }>(
    `SELECT count(*)::int AS rows, count(DISTINCT item_id)::int AS distinct
     FROM assistant_operation_item WHERE operation_id = $1`,
    [operationId],
  );
  return rows[0] ?? { rows: 0, distinct: 0 };
}

async function dispatchEpoch(harness: Harness, operationId: string): Promise<number> {
  const rows = await harness.db.query<{ epoch: number }>(
    `SELECT (state_json->>'dispatch_epoch')::int AS epoch FROM assistant_operation WHERE id = $1`,
    [operationId],
  );
  return rows[0]?.epoch ?? 0;
}

// ---------------------------------------------------------------------------------------------

describe.each(QUEUE_BACKENDS)('worker processes (postgres database, %s queue, real child processes)', (queue) => {
  it('two worker processes share 2,000 items and handle each exactly once', { timeout: 120_000 }, async () => {
    const { harness, prefix } = await startApi({ queue });
    const tenant = await harness.newTenant();
    await Promise.all([startWorker('worker-1', prefix, {}, queue), startWorker('worker-2', prefix, {}, queue)]);
    // Both processes are consumers of the counting queue before any job exists: 'workers
    // started' is logged once each BullMQ worker is ready. Redis also lists them (BullMQ's
    // getWorkers, which its Postgres backend cannot answer reliably).
    if (queue === 'redis') {
      const counting = harness.service.dispatcher.queues.find((q) => q.name === 'batches-counting');
      await eventually(async () => ((await counting?.getWorkersCount()) === 2 ? true : undefined), {
        timeoutMs: START_TIMEOUT_MS,
        what: 'both worker processes to consume the counting queue',
      });
    }

    const sidefx = testKey('sidefx');
    const operationId = await createCounting(tenant, randomUUID(), {
      items: 2000,
      batchSize: 20,
      lanes: 4,
      latencyMs: 2,
      sidefx,
    });
    const end = await waitForProgress(harness.url, tenant, operationId, finished, RUN_TIMEOUT_MS);
    expect(end).toMatchObject({
      status: 'completed',
      total_items: 2000,
      completed_count: 2000,
      failed_count: 0,
      remaining_count: 0,
      in_flight_count: 0,
    });
    expect(await itemStates(harness, operationId)).toEqual({ completed: 2000 });

    const effects = await sideEffects(sidefx);
    expect(effects.size).toBe(2000);
    expect([...effects.keys()].sort()).toEqual(ids(2000).sort());
    expect([...effects].filter(([, count]) => count !== 1)).toEqual([]);
  });

  it('loses nothing when one of two workers is SIGKILLed mid-run', { timeout: 120_000 }, async () => {
    const { harness, prefix } = await startApi({ queue });
    const tenant = await harness.newTenant();
    const [victim] = await Promise.all([
      startWorker('victim', prefix, {}, queue),
      startWorker('survivor', prefix, {}, queue),
    ]);
    const items = 3000;
    const batchSize = 20;
    const lanes = 4;
    const sidefx = testKey('sidefx');
    const operationId = await createCounting(tenant, randomUUID(), {
      items,
      batchSize,
      lanes,
      latencyMs: 2,
      sidefx,
    });

    const atKill = await waitForProgress(
      harness.url,
      tenant,
      operationId,
      (p) => p.completed_count >= items / 4 || finished(p),
      RUN_TIMEOUT_MS,
    );
    expect(atKill.status).toBe('active'); // killed mid-run, not after the end
    victim?.process.kill('SIGKILL');
    expect(await victim?.waitForExit()).toEqual({ code: null, signal: 'SIGKILL' });

    const end = await waitForProgress(harness.url, tenant, operationId, finished, RUN_TIMEOUT_MS);
    expect(end).toMatchObject({
      status: 'completed',
      completed_count: items,
      failed_count: 0,
      remaining_count: 0,
      in_flight_count: 0,
    });
    // Every item recorded, exactly once: one row each, all completed (none pending, leased or
    // abandoned), and the operation's counter agrees with the rows.
    expect(await itemRows(harness, operationId)).toEqual({ rows: items, distinct: items });
    expect(await itemStates(harness, operationId)).toEqual({ completed: items });
    const recorded = await harness.db.query<{ n: number }>(
      `SELECT coalesce(sum((data->>'completed')::int), 0)::int AS n
       FROM operation_event WHERE operation_id = $1 AND kind = 'batch_recorded'`,
      [operationId],
    );
    expect(recorded[0]?.n).toBe(items);

    // Every item's side effect happened. Only the victim's batches in flight when it died can
    // have run twice (handled there, then again after their lease or job came back): at most
    // one batch per lane, since the operation never runs more than `lanes` batches at once and
    // a process runs at most `concurrency` (4) of them; each of those items at most twice.
    const effects = await sideEffects(sidefx);
    expect(effects.size).toBe(items);
    expect([...effects.values()].every((count) => count >= 1)).toBe(true);
    const twice = [...effects.values()].filter((count) => count > 1);
    const inFlightBound = Math.min(lanes, countingHandler.concurrency ?? 4) * batchSize;
    expect(twice.length).toBeLessThanOrEqual(inFlightBound);
    expect(Math.max(...effects.values())).toBeLessThanOrEqual(2);
  });

  it('finishes the batches in flight on SIGTERM, exits 0, and leaves nothing leased', {
    timeout: 120_000,
  }, async () => {
    const { harness, prefix } = await startApi({ queue });
    const tenant = await harness.newTenant();
    const first = await startWorker('first', prefix, {}, queue);
    const items = 80;
    const sidefx = testKey('sidefx');
    // 5 items × 300 ms = 1.5 s per batch, within the 2 s lease; 4 lanes.
    const operationId = await createCounting(tenant, randomUUID(), {
      items,
      batchSize: 5,
      lanes: 4,
      latencyMs: 300,
      sidefx,
    });

    // A batch has been recorded and others are leased: batches are in flight.
    const inFlight = await waitForProgress(
      harness.url,
      tenant,
      operationId,
      (p) => (p.completed_count >= 5 && p.in_flight_count > 0) || finished(p),
      RUN_TIMEOUT_MS,
    );
    expect(inFlight.status).toBe('active');
    const epoch = await dispatchEpoch(harness, operationId);
    const signalledAt = Date.now();
    first.process.kill('SIGTERM');
    expect(await first.waitForExit()).toEqual({ code: 0, signal: null });
    // Finished its batches (at most 1.5 s each), well before the batch grace (7.5 s) or the
    // shutdown bound (OPSPAD_SHUTDOWN_TIMEOUT, 15 s).
    expect(Date.now() - signalledAt).toBeLessThan(10_000);
    await within(first.closed, EXIT_TIMEOUT_MS, 'the first worker’s output');
    expect(first.lines.map(logMessage)).toContain('stopped');

    // Nothing is left leased to the jobs of the process that stopped (the lane generation it
    // ran): its batches were recorded or given back. (Scoped to that generation because another
    // process's reconciler sharing this database could adopt the operation from here on.)
    const leased = await harness.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM (${ITEM_STATES}) i
       WHERE operation_id = $1 AND status = 'leased' AND lease_owner LIKE $2`,
      [operationId, `${operationId}.${epoch}.%`],
    );
    expect(leased[0]?.n).toBe(0);
    const stopped = await tenant.get<{ status: string; completed_count: number }>(`/v1/operations/${operationId}`);
    expect(stopped.body.status).toBe('active');
    expect(stopped.body.completed_count).toBeGreaterThanOrEqual(inFlight.completed_count);
    expect(stopped.body.completed_count).toBeLessThan(items);
    // What it handled, it recorded: no side effect without its result.
    const effectsAtStop = await sideEffects(sidefx);
    expect(effectsAtStop.size).toBe(stopped.body.completed_count);

    // A worker started afterwards takes the lanes over and finishes, each item handled once.
    await startWorker('second', prefix, {}, queue);
    const end = await waitForProgress(harness.url, tenant, operationId, finished, RUN_TIMEOUT_MS);
    expect(end).toMatchObject({
      status: 'completed',
      completed_count: items,
      failed_count: 0,
      remaining_count: 0,
      in_flight_count: 0,
    });
    expect(await itemStates(harness, operationId)).toEqual({ completed: items });
    const effects = await sideEffects(sidefx);
    expect(effects.size).toBe(items);
    expect([...effects].filter(([, count]) => count !== 1)).toEqual([]);
  });
});

function watch(harness: Harness, tenant: Tenant, operationId: string): Spawned {
  return spawnOpspad('ops watch', ['ops', 'watch', operationId], {
    OPSPAD_URL: harness.url,
    OPSPAD_API_KEY: tenant.apiKey,
    OPSPAD_LOG_LEVEL: 'silent',
  });
}

describe.each(QUEUE_BACKENDS)('opspad ops watch (child process, %s queue)', (queue) => {
  it('follows a 3,000-item demo operation to the end and exits 0', { timeout: 120_000 }, async () => {
    const { harness } = await startApi({ workers: true, queue });
    const tenant = await harness.newTenant();
    const conversation = randomUUID();
    const created = await tenant.op(conversation, {
      action: 'create',
      operation_type: 'demo',
      total_items: 3000,
      item_ids: ids(3000, 'demo'),
      batch_size: 100,
      // 30 batches of 200 ms over 4 lanes: at least 1.5 s, so the pause below lands before the
      // end even on a loaded machine.
      query_params: { latency_ms: 200 },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    const operationId = created.body.operation_id as string;
    // Held while the watcher starts, so it follows the operation running rather than only its end.
    const paused = await tenant.op(conversation, { action: 'pause', operation_id: operationId });
    expect(paused.status, JSON.stringify(paused.body)).toBe(200);

    const watcher = watch(harness, tenant, operationId);
    await watcher.waitForLine((line) => line.includes('/3000') && line.includes('paused'), 'the first progress line');
    const resumed = await tenant.op(conversation, { action: 'resume', operation_id: operationId });
    expect(resumed.status, JSON.stringify(resumed.body)).toBe(200);

    expect(await watcher.waitForExit(RUN_TIMEOUT_MS)).toEqual({ code: 0, signal: null });
    await within(watcher.closed, EXIT_TIMEOUT_MS, 'the watcher’s output');
    const lines = watcher.lines.filter((line) => line.trim() !== '');
    expect(lines.length).toBeGreaterThanOrEqual(2);
    const last = lines.at(-1) ?? '';
    expect(last).toContain('3000/3000');
    expect(last).toContain('completed');
    const got = await tenant.get(`/v1/operations/${operationId}`);
    expect(got.body).toMatchObject({ status: 'completed', completed_count: 3000 });
  });
});

describe('opspad ops watch (child process), unknown operation', () => {
  it('exits non-zero naming the 404 for an unknown operation', { timeout: 60_000 }, async () => {
    const { harness } = await startApi();
    const tenant = await harness.newTenant();
    const watcher = watch(harness, tenant, randomUUID());
    const exit = await watcher.waitForExit(START_TIMEOUT_MS);
    await within(watcher.closed, EXIT_TIMEOUT_MS, 'the watcher’s output');
    expect(exit.code).not.toBe(0);
    expect(exit.code).not.toBeNull();
    expect(watcher.stderr()).toMatch(/404|not_found/);
  });
});
