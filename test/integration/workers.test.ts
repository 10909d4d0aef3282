/**
 * Background operations end to end in one process, on real Postgres, with the jobs in Redis and
 * then in Postgres (BullMQ's PostgreSQL backend, no Redis at all): the demo handler at 5,000
 * items, pause and resume, cancel, fairness between a large and a small operation, the circuit
 * breaker, the reconciler after the queue lost every job, idle paused operations expiring. The
 * embedded database with its queue beside opspad's tables gets the same core checks.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { demoFails } from '../../src/handlers/demo.ts';
import { closeCountingClient, countingHandler, sideEffects } from '../fixtures/counting-handler.ts';
import { type Harness, ids, QUEUE_BACKENDS, startHarness, type Tenant } from '../helpers/harness.ts';
import { loseEveryJob } from '../helpers/queue.ts';
import { testKey } from '../helpers/redis.ts';
import { eventually, finished, waitForProgress } from '../helpers/wait.ts';

const FAST_WORKERS = {
  OPSPAD_LEASE_TTL: '5s',
  OPSPAD_JOB_LOCK_TTL: '2s',
  OPSPAD_RECONCILE_INTERVAL: '300ms',
};

describe.each(QUEUE_BACKENDS)('background workers (postgres database, %s queue)', (queue) => {
  let harness: Harness;
  let tenant: Tenant;

  beforeAll(async () => {
    harness = await startHarness('postgres', { queue, workers: true, handlers: [countingHandler], env: FAST_WORKERS });
    tenant = await harness.newTenant();
  });
  afterAll(async () => {
    await harness.close();
    closeCountingClient();
  });

  async function itemStates(operationId: string) {
    return harness.db.query<{ status: string; n: number }>(
      `SELECT status, count(*)::int AS n FROM assistant_operation_item WHERE operation_id = $1 GROUP BY status`,
      [operationId],
    );
  }

  async function createBackground(conversation: string, input: Record<string, unknown>) {
    const created = await tenant.op(conversation, { action: 'create', ...input });
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    return created.body.operation_id as string;
  }

  it('completes 5,000 demo items with a 10% failure rate, each failure recorded once with its reason', async () => {
    const conversation = randomUUID();
    const itemIds = ids(5000, 'lead');
    const operationId = await createBackground(conversation, {
      operation_type: 'demo',
      total_items: itemIds.length,
      item_ids: itemIds,
      batch_size: 100,
      query_params: { failure_rate: 0.1 },
    });
    const created = await tenant.op(conversation, { action: 'get', operation_id: operationId });
    expect(created.body.execution).toBe('background');

    const end = await waitForProgress(harness.url, tenant, operationId, finished);
    const expectedFailures = itemIds.filter((id) => demoFails(id, 0.1));
    expect(end).toMatchObject({
      status: 'completed',
      completed_count: 5000 - expectedFailures.length,
      failed_count: expectedFailures.length,
      remaining_count: 0,
      in_flight_count: 0,
    });
    const failed = await harness.db.query<{ item_id: string; reason: string }>(
      `SELECT item_id, reason FROM assistant_operation_item WHERE operation_id = $1 AND status = 'failed' ORDER BY ordinal`,
      [operationId],
    );
    expect(failed.map((f) => f.item_id)).toEqual(expectedFailures);
    expect(new Set(failed.map((f) => f.reason))).toEqual(new Set(['demo failure (failure_rate 0.1)']));
    expect(await itemStates(operationId)).toHaveLength(2); // only completed and failed rows remain
    expect((await tenant.context(conversation)).body.text).toBe('');
  });

  it('pauses within one batch and finishes after resume, handling each item once', async () => {
    const conversation = randomUUID();
    const sidefx = testKey('sidefx');
    const operationId = await createBackground(conversation, {
      operation_type: 'counting',
      total_items: 400,
      item_ids: ids(400),
      batch_size: 10,
      max_parallel_batches: 2,
      query_params: { sidefx_key: sidefx, latency_ms: 5 },
    });
    await waitForProgress(harness.url, tenant, operationId, (p) => p.completed_count >= 50);
    const paused = await tenant.op(conversation, { action: 'pause', operation_id: operationId });
    expect(paused.body.status).toBe('paused');

    // In-flight batches finish or give their items back; then nothing is leased any more.
    const settled = await waitForProgress(harness.url, tenant, operationId, (p) => p.in_flight_count === 0);
    expect(settled.status).toBe('paused');
    await eventually(async () => ((await harness.service.dispatcher.liveLanes()).size === 0 ? true : undefined), {
      what: 'the lanes to stop',
    });
    const atRest = await tenant.op(conversation, { action: 'get', operation_id: operationId });
    const recordedWhilePaused = (atRest.body.completed_count as number) + (atRest.body.failed_count as number);
    // Stopped within one batch per lane of the pause: at most 2 lanes × 10 items after it.
    expect(recordedWhilePaused).toBeLessThanOrEqual((paused.body.completed_count as number) + 2 * 10);
    expect(recordedWhilePaused).toBeLessThan(400);
    expect((await sideEffects(sidefx)).size).toBe(recordedWhilePaused);

    const resumed = await tenant.op(conversation, { action: 'resume', operation_id: operationId });
    expect(resumed.body.status).toBe('active');
    const end = await waitForProgress(harness.url, tenant, operationId, finished);
    expect(end).toMatchObject({ status: 'completed', completed_count: 400, failed_count: 0 });
    const effects = await sideEffects(sidefx);
    expect(effects.size).toBe(400);
    expect([...effects.values()].every((count) => count === 1)).toBe(true);
  });

  it('cancels: counts match the rows, and nothing is handled after in-flight batches', async () => {
    const conversation = randomUUID();
    const sidefx = testKey('sidefx');
    const operationId = await createBackground(conversation, {
      operation_type: 'counting',
      total_items: 300,
      item_ids: ids(300),
      batch_size: 10,
      max_parallel_batches: 2,
      query_params: { sidefx_key: sidefx, latency_ms: 5 },
    });
    await waitForProgress(harness.url, tenant, operationId, (p) => p.completed_count >= 30);
    const cancelled = await tenant.op(conversation, { action: 'cancel', operation_id: operationId });
    expect(cancelled.status).toBe(200);
    const states = Object.fromEntries((await itemStates(operationId)).map((s) => [s.status, s.n]));
    expect(states).toEqual({ completed: cancelled.body.completed_count, abandoned: cancelled.body.abandoned_count });
    expect((cancelled.body.completed_count as number) + (cancelled.body.abandoned_count as number)).toBe(300);

    await eventually(async () => ((await harness.service.dispatcher.liveLanes()).size === 0 ? true : undefined), {
      what: 'the lanes to stop',
    });
    // Items in flight when cancel returned may finish their handler (at most 2 lanes × 10);
    // none of them is recorded, and no new batch starts.
    const effects = await sideEffects(sidefx);
    expect(effects.size - (cancelled.body.completed_count as number)).toBeLessThanOrEqual(2 * 10);
    const after = await tenant.op(conversation, { action: 'get', operation_id: operationId });
    expect(after.body).toMatchObject({ status: 'cancelled', completed_count: cancelled.body.completed_count });
  });

  it('finishes a small operation created behind a large one first', async () => {
    const large = await createBackground(randomUUID(), {
      operation_type: 'demo',
      total_items: 20_000,
      item_ids: ids(20_000, 'big'),
      batch_size: 50,
      query_params: { latency_ms: 20 },
    });
    await waitForProgress(harness.url, tenant, large, (p) => p.completed_count > 0);
    const small = await createBackground(randomUUID(), {
      operation_type: 'demo',
      total_items: 100,
      item_ids: ids(100, 'small'),
      batch_size: 50,
      query_params: { latency_ms: 20 },
    });
    const smallEnd = await waitForProgress(harness.url, tenant, small, finished);
    expect(smallEnd).toMatchObject({ status: 'completed', completed_count: 100 });
    const largeNow = await tenant.get<{ status: string; remaining_count: number }>(`/v1/operations/${large}`);
    expect(largeNow.body.status).toBe('active');
    expect(largeNow.body.remaining_count).toBeGreaterThan(10_000);
    const conversationOfLarge = (
      await harness.db.query<{ conversation_id: string }>(
        'SELECT conversation_id FROM assistant_operation WHERE id = $1',
        [large],
      )
    )[0]?.conversation_id as string;
    await tenant.op(conversationOfLarge, { action: 'cancel', operation_id: large });
  });

  it('keeps the lease of a batch slower than the lease while its handler runs (no second handling)', async () => {
    const slowHarness = await startHarness('postgres', {
      queue,
      workers: true,
      handlers: [countingHandler],
      env: { OPSPAD_LEASE_TTL: '1s', OPSPAD_JOB_LOCK_TTL: '2s', OPSPAD_RECONCILE_INTERVAL: '1h' },
    });
    try {
      const slowTenant = await slowHarness.newTenant();
      const sidefx = testKey('sidefx');
      const itemIds = ['slow-1', ...ids(300, 'fast')];
      const created = await slowTenant.op(randomUUID(), {
        action: 'create',
        operation_type: 'counting',
        total_items: itemIds.length,
        item_ids: itemIds,
        batch_size: 1,
        max_parallel_batches: 2,
        // slow-1 takes 2.5 lease periods; the other lane keeps leasing (and would reclaim it).
        query_params: { sidefx_key: sidefx, latency_ms: 0, slow_items: ['slow-1'], slow_ms: 2500 },
      });
      const operationId = created.body.operation_id as string;
      const end = await waitForProgress(slowHarness.url, slowTenant, operationId, finished);
      expect(end).toMatchObject({ status: 'completed', completed_count: itemIds.length });
      expect((await sideEffects(sidefx)).get('slow-1')).toBe(1);
      const expired = await slowHarness.db.query(
        `SELECT 1 FROM operation_event WHERE operation_id = $1 AND kind = 'lease_expired'`,
        [operationId],
      );
      expect(expired).toEqual([]);
    } finally {
      await slowHarness.close();
    }
  });

  it('retries the failed items of a background operation in the background', async () => {
    const conversation = randomUUID();
    const itemIds = ids(300, 'retry');
    const operationId = await createBackground(conversation, {
      operation_type: 'demo',
      total_items: itemIds.length,
      item_ids: itemIds,
      batch_size: 50,
      query_params: { failure_rate: 0.2 },
    });
    const first = await waitForProgress(harness.url, tenant, operationId, finished);
    const retry = await tenant.op(conversation, { action: 'retry_failed', operation_id: operationId });
    expect(retry.body).toMatchObject({ execution: 'background', total_items: first.failed_count });
    // The demo handler fails the same items again: the retry completes with all of them failed.
    const end = await waitForProgress(harness.url, tenant, retry.body.operation_id as string, finished);
    expect(end).toMatchObject({ status: 'completed', completed_count: 0, failed_count: first.failed_count });
  });

  it('pauses an operation whose failure rate trips the circuit breaker, and tells the assistant why', async () => {
    const conversation = randomUUID();
    const operationId = await createBackground(conversation, {
      operation_type: 'demo',
      total_items: 1000,
      item_ids: ids(1000, 'bad'),
      batch_size: 10,
      max_parallel_batches: 1,
      max_failure_rate: 0.5,
      query_params: { failure_rate: 0.9 },
    });
    const paused = await waitForProgress(harness.url, tenant, operationId, (p) => p.status !== 'active');
    expect(paused.status).toBe('paused');
    expect(paused.paused_reason).toMatch(/circuit breaker: \d+ of the last 50 items failed/);
    expect(paused.completed_count + paused.failed_count).toBeLessThan(100);
    const context = await tenant.context(conversation);
    expect(context.body.text).toMatch(
      /paused by the circuit breaker \(\d+ of the last 50 items failed\): get the failures, fix the cause, then resume\./,
    );
  });
});

describe.each(QUEUE_BACKENDS)('the reconciler (postgres database, %s queue)', (queue) => {
  it('dispatches again an operation whose jobs the queue lost, and it completes with exact counts', async () => {
    // An API-only process accepts the operation and enqueues its lanes…
    const api = await startHarness('postgres', { queue, workers: false, env: FAST_WORKERS });
    const tenant = await api.newTenant();
    const conversation = randomUUID();
    const created = await tenant.op(conversation, {
      action: 'create',
      operation_type: 'demo',
      total_items: 2000,
      item_ids: ids(2000),
      batch_size: 100,
      query_params: { failure_rate: 0.05 },
    });
    const operationId = created.body.operation_id as string;
    expect((await api.service.dispatcher.liveLanes()).size).toBeGreaterThan(0);
    // …then the queue loses every job (FLUSHALL for this prefix, or its schema emptied)…
    await loseEveryJob(api.service.queueBackend, api.db);
    expect((await api.service.dispatcher.liveLanes()).size).toBe(0);

    // …and a worker process starting on the same database and queue finishes it anyway.
    const worker = await startHarness('postgres', {
      queue,
      workers: true,
      env: { ...FAST_WORKERS, OPSPAD_QUEUE_PREFIX: api.prefix },
    });
    try {
      const end = await waitForProgress(api.url, tenant, operationId, finished);
      const failures = ids(2000).filter((id) => demoFails(id, 0.05)).length;
      expect(end).toMatchObject({ status: 'completed', completed_count: 2000 - failures, failed_count: failures });
      const epochs = await api.db.query<{ epoch: number }>(
        `SELECT (state_json->>'dispatch_epoch')::int AS epoch FROM assistant_operation WHERE id = $1`,
        [operationId],
      );
      expect(epochs[0]?.epoch).toBe(2); // re-dispatched once, by the reconciler
    } finally {
      await worker.close();
      await api.close();
    }
  });

  it('leaves alone the operations another deployment (another queue prefix) dispatches', async () => {
    const api = await startHarness('postgres', { queue, workers: false, env: FAST_WORKERS });
    const other = await startHarness('postgres', { queue, workers: true, env: FAST_WORKERS });
    try {
      const tenant = await api.newTenant();
      const created = await tenant.op(randomUUID(), {
        action: 'create',
        operation_type: 'demo',
        total_items: 10,
        item_ids: ids(10),
      });
      const operationId = created.body.operation_id as string;
      await api.db.query(`UPDATE assistant_operation SET updated_at = now() - interval '1 hour' WHERE id = $1`, [
        operationId,
      ]);
      const report = await other.service.reconciler?.runOnce();
      expect(report).toBeDefined();
      const rows = await api.db.query<{ epoch: number; status: string }>(
        `SELECT (state_json->>'dispatch_epoch')::int AS epoch, status FROM assistant_operation WHERE id = $1`,
        [operationId],
      );
      expect(rows[0]).toEqual({ epoch: 1, status: 'active' });
      expect((await other.service.dispatcher.liveLanes()).has(`${operationId}.1`)).toBe(false);
    } finally {
      await other.close();
      await api.close();
    }
  });

  it('cancels paused operations left untouched longer than OPSPAD_PAUSED_TTL, with an event', async () => {
    const harness = await startHarness('postgres', {
      queue,
      workers: true,
      env: { ...FAST_WORKERS, OPSPAD_PAUSED_TTL: '1h', OPSPAD_RECONCILE_INTERVAL: '1h' },
    });
    try {
      const tenant = await harness.newTenant();
      const conversation = randomUUID();
      const first = await tenant.op(conversation, {
        action: 'create',
        operation_type: 'manual',
        total_items: 3,
        item_ids: ids(3),
      });
      const second = await tenant.op(conversation, {
        action: 'create',
        operation_type: 'manual',
        total_items: 1,
        item_ids: ids(1),
      });
      expect(second.status, JSON.stringify(second.body)).toBe(200);
      const stale = first.body.operation_id as string;
      await harness.db.query(`UPDATE assistant_operation SET updated_at = now() - interval '2 hours' WHERE id = $1`, [
        stale,
      ]);
      const report = await harness.service.reconciler?.runOnce();
      const row = async () =>
        JSON.stringify(
          await harness.db.query(
            `SELECT status, updated_at, now() AS now, (SELECT json_agg(json_build_object('kind', kind, 'actor', actor, 'at', created_at) ORDER BY id)
               FROM operation_event WHERE operation_id = $1) AS events FROM assistant_operation WHERE id = $1`,
            [stale],
          ),
        );
      expect(report?.expired, `report ${JSON.stringify(report)}, operation ${await row()}`).toBeGreaterThanOrEqual(1);
      const got = await tenant.op(conversation, { action: 'get', operation_id: stale });
      expect(got.body).toMatchObject({ status: 'cancelled', abandoned_count: 3 });
      const events = await harness.db.query<{ kind: string; actor: string }>(
        'SELECT kind, actor FROM operation_event WHERE operation_id = $1 ORDER BY id DESC LIMIT 1',
        [stale],
      );
      expect(events[0]).toEqual({ kind: 'expired', actor: 'reconciler' });
    } finally {
      await harness.close();
    }
  });
});
