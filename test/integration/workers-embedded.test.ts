/**
 * Background operations on the embedded database with its queue beside it (PGlite, BullMQ's
 * PostgreSQL backend in the `bullmq` schema of the same instance, no Redis): the demo handler
 * with failures, pause and resume handling each item once, and the reconciler putting back the
 * lanes of an operation whose jobs were lost, once workers start beside the API.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/env.ts';
import { demoFails } from '../../src/handlers/demo.ts';
import { createLogger } from '../../src/logger.ts';
import { createOpspad } from '../../src/main.ts';
import { closeCountingClient, countingHandler, sideEffects } from '../fixtures/counting-handler.ts';
import { type Harness, ids, startHarness, type Tenant } from '../helpers/harness.ts';
import { loseEveryJob } from '../helpers/queue.ts';
import { testKey } from '../helpers/redis.ts';
import { eventually, finished, waitForProgress } from '../helpers/wait.ts';

const FAST_WORKERS = {
  OPSPAD_LEASE_TTL: '5s',
  OPSPAD_JOB_LOCK_TTL: '2s',
  OPSPAD_RECONCILE_INTERVAL: '300ms',
};

afterAll(() => {
  closeCountingClient();
});

describe('background workers on the embedded database (PGlite, the queue in a schema beside it)', () => {
  let harness: Harness;
  let tenant: Tenant;

  beforeAll(async () => {
    harness = await startHarness('pglite', {
      queue: 'postgres',
      workers: true,
      handlers: [countingHandler],
      env: FAST_WORKERS,
    });
    tenant = await harness.newTenant();
  });
  afterAll(async () => {
    await harness.close();
  });

  it('completes 2,000 demo items with a 10% failure rate, exactly', async () => {
    const itemIds = ids(2000, 'lead');
    const created = await tenant.op(randomUUID(), {
      action: 'create',
      operation_type: 'demo',
      total_items: itemIds.length,
      item_ids: itemIds,
      batch_size: 100,
      query_params: { failure_rate: 0.1 },
    });
    const end = await waitForProgress(harness.url, tenant, created.body.operation_id as string, finished);
    const failures = itemIds.filter((id) => demoFails(id, 0.1)).length;
    expect(end).toMatchObject({ status: 'completed', completed_count: 2000 - failures, failed_count: failures });
    expect(harness.service.queueBackend.location).toBe('the embedded database, schema bullmq');
  });

  it('pauses within one batch and finishes after resume, handling each item once', async () => {
    const conversation = randomUUID();
    const sidefx = testKey('sidefx');
    const created = await tenant.op(conversation, {
      action: 'create',
      operation_type: 'counting',
      total_items: 200,
      item_ids: ids(200),
      batch_size: 10,
      max_parallel_batches: 2,
      query_params: { sidefx_key: sidefx, latency_ms: 5 },
    });
    const operationId = created.body.operation_id as string;
    await waitForProgress(harness.url, tenant, operationId, (p) => p.completed_count >= 30);
    const paused = await tenant.op(conversation, { action: 'pause', operation_id: operationId });
    expect(paused.body.status).toBe('paused');
    await waitForProgress(harness.url, tenant, operationId, (p) => p.in_flight_count === 0);
    await eventually(async () => ((await harness.service.dispatcher.liveLanes()).size === 0 ? true : undefined), {
      what: 'the lanes to stop',
    });
    const atRest = await tenant.op(conversation, { action: 'get', operation_id: operationId });
    const recorded = (atRest.body.completed_count as number) + (atRest.body.failed_count as number);
    expect(recorded).toBeLessThanOrEqual((paused.body.completed_count as number) + 2 * 10);
    expect(recorded).toBeLessThan(200);

    await tenant.op(conversation, { action: 'resume', operation_id: operationId });
    const end = await waitForProgress(harness.url, tenant, operationId, finished);
    expect(end).toMatchObject({ status: 'completed', completed_count: 200 });
    const effects = await sideEffects(sidefx);
    expect(effects.size).toBe(200);
    expect([...effects.values()].every((count) => count === 1)).toBe(true);
  });
});

describe('the reconciler on the embedded database', () => {
  it('dispatches again an operation whose jobs were lost, once workers start beside the API', async () => {
    const api = await startHarness('pglite', { queue: 'postgres', workers: false, env: FAST_WORKERS });
    try {
      const tenant = await api.newTenant();
      const created = await tenant.op(randomUUID(), {
        action: 'create',
        operation_type: 'demo',
        total_items: 500,
        item_ids: ids(500),
        batch_size: 50,
      });
      const operationId = created.body.operation_id as string;
      expect((await api.service.dispatcher.liveLanes()).size).toBeGreaterThan(0);
      await loseEveryJob(api.service.queueBackend, api.db);
      expect((await api.service.dispatcher.liveLanes()).size).toBe(0);

      // Workers on the same embedded database (one PGlite instance, a second queue connection).
      const config = loadConfig({ ...FAST_WORKERS, OPSPAD_QUEUE_PREFIX: api.prefix, OPSPAD_LOG_LEVEL: 'silent' });
      const workers = await createOpspad({ config, logger: createLogger('silent'), db: api.db, api: false });
      try {
        const end = await waitForProgress(api.url, tenant, operationId, finished);
        expect(end).toMatchObject({ status: 'completed', completed_count: 500 });
        const epochs = await api.db.query<{ epoch: number }>(
          `SELECT (state_json->>'dispatch_epoch')::int AS epoch FROM assistant_operation WHERE id = $1`,
          [operationId],
        );
        expect(epochs[0]?.epoch).toBe(2);
      } finally {
        await workers.close();
      }
    } finally {
      await api.close();
    }
  });
});
