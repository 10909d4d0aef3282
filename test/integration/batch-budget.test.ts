/**
 * Batch time budgets, on real Postgres with the jobs in Redis and then in Postgres, with
 * handlers passed in code:
 * - a handler that ignores its signal loses its slot after the grace period; what it finished is
 *   recorded, and a well-behaved retry finishes the rest; its late rejection changes nothing;
 * - cancel frees a slot held by such a handler the same way (and a handler's own batchTimeoutMs
 *   replaces OPSPAD_BATCH_TIMEOUT);
 * - an item the budget keeps cutting short fails after its attempts instead of cycling forever;
 * - the worker pool's close does not wait for a handler that ignores the shutdown.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHandlerRegistry } from '../../src/handlers/registry.ts';
import type { ItemHandler } from '../../src/handlers/types.ts';
import { createLogger } from '../../src/logger.ts';
import { createMetrics } from '../../src/metrics.ts';
import { startWorkerPool } from '../../src/queue/worker-pool.ts';
import { BUDGET, gate, metricValue, QUIET } from '../helpers/fair-share.ts';
import { type Harness, ids, QUEUE_BACKENDS, startHarness, type Tenant } from '../helpers/harness.ts';
import { eventually, finished, waitForProgress } from '../helpers/wait.ts';

describe.each(QUEUE_BACKENDS)('batch budgets (postgres database, %s queue)', (queue) => {
  let harness: Harness;
  let tenant: Tenant;
  /** Calls of each item that returned (not the one left hanging). */
  const handled = new Map<string, number>();
  const sulkyStuck = gate();
  const sulkyEntered = gate();
  let sulkyHung = false;
  const stubbornEntered = gate();

  // Ignores its signal the first time it gets item s-2 (never returns from that call); well
  // behaved otherwise.
  const sulky: ItemHandler = {
    type: 'sulky',
    concurrency: 1,
    async handle(itemId) {
      if (itemId === 's-2' && !sulkyHung) {
        sulkyHung = true;
        sulkyEntered.resolve();
        await sulkyStuck.promise;
        return;
      }
      handled.set(itemId, (handled.get(itemId) ?? 0) + 1);
    },
  };
  // Never returns for an operation with query_params.hang, whatever its signal says.
  const stubborn: ItemHandler = {
    type: 'stubborn',
    concurrency: 1,
    // Far beyond the test: only cancel can free the slot (OPSPAD_BATCH_TIMEOUT would, in 2 s).
    batchTimeoutMs: 3_600_000,
    async handle(itemId, ctx) {
      if (ctx.queryParams.hang === true) {
        stubbornEntered.resolve();
        await new Promise(() => {});
      }
      handled.set(itemId, (handled.get(itemId) ?? 0) + 1);
    },
  };

  // Honours its signal but never finishes an item in time: each batch runs out its budget.
  const slowpoke: ItemHandler = {
    type: 'slowpoke',
    concurrency: 1,
    attempts: 2,
    batchTimeoutMs: 300,
    handle: (_itemId, ctx) =>
      new Promise((_, reject) => ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason))),
  };

  beforeAll(async () => {
    harness = await startHarness('postgres', {
      queue,
      workers: true,
      handlers: [sulky, stubborn, slowpoke],
      env: { ...BUDGET, ...QUIET },
    });
    tenant = await harness.newTenant();
  });
  afterAll(async () => {
    await harness.close();
  });

  const metric = (name: string, labels: Record<string, string>) => metricValue([harness.service.metrics], name, labels);

  it('a signal-ignoring handler loses its slot after the grace period, and a well-behaved retry finishes its items', async () => {
    const conversation = randomUUID();
    const created = await tenant.op(conversation, {
      action: 'create',
      operation_type: 'sulky',
      total_items: 3,
      item_ids: ['s-1', 's-2', 's-3'],
      batch_size: 3,
      max_parallel_batches: 1,
    });
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    const operationId = created.body.operation_id as string;
    await sulkyEntered.promise;

    // One slot, one lane: the retry can only run once the stuck batch has given up its slot.
    const end = await waitForProgress(harness.url, tenant, operationId, finished);
    expect(end).toMatchObject({ status: 'completed', completed_count: 3, failed_count: 0, in_flight_count: 0 });
    expect(Object.fromEntries(handled)).toMatchObject({ 's-1': 1, 's-2': 1, 's-3': 1 });
    expect(await metric('opspad_batches_abandoned_total', { operation_type: 'sulky', reason: 'timeout' })).toBe(1);
    expect(await metric('opspad_abandoned_handlers', { operation_type: 'sulky' })).toBe(1);

    // The abandoned batch recorded what it had finished (s-1) and gave the rest back.
    const recorded = await harness.db.query<{ data: { completed: number } }>(
      `SELECT data FROM operation_event WHERE operation_id = $1 AND kind = 'batch_recorded' ORDER BY id`,
      [operationId],
    );
    expect(recorded.map((event) => event.data.completed)).toEqual([1, 2]);

    // The stuck call finally fails: nothing changes, and nothing is left unhandled.
    sulkyStuck.reject(new Error('far too late'));
    await eventually(
      async () => ((await metric('opspad_abandoned_handlers', { operation_type: 'sulky' })) === 0 ? true : undefined),
      { what: 'the abandoned call to be counted as settled' },
    );
    const after = await tenant.op(conversation, { action: 'get', operation_id: operationId });
    expect(after.body).toMatchObject({ status: 'completed', completed_count: 3, failed_count: 0 });
  });

  it('cancel frees a slot held by a handler that ignores its signal, after the grace period', async () => {
    const stuck = await tenant.op(randomUUID(), {
      action: 'create',
      operation_type: 'stubborn',
      total_items: 1,
      item_ids: ['x-1'],
      query_params: { hang: true },
    });
    const stuckId = stuck.body.operation_id as string;
    await stubbornEntered.promise;
    // Queued behind the stuck batch: the type's only slot is taken.
    const next = await tenant.op(randomUUID(), {
      action: 'create',
      operation_type: 'stubborn',
      total_items: 1,
      item_ids: ['y-1'],
    });
    expect(next.status, JSON.stringify(next.body)).toBe(200);

    const conversationOfStuck = (
      await harness.db.query<{ conversation_id: string }>(
        'SELECT conversation_id FROM assistant_operation WHERE id = $1',
        [stuckId],
      )
    )[0]?.conversation_id as string;
    const cancelled = await tenant.op(conversationOfStuck, { action: 'cancel', operation_id: stuckId });
    expect(cancelled.body).toMatchObject({ status: 'cancelled', abandoned_count: 1 });

    const end = await waitForProgress(harness.url, tenant, next.body.operation_id as string, finished);
    expect(end).toMatchObject({ status: 'completed', completed_count: 1 });
    expect(handled.get('y-1')).toBe(1);
    expect(handled.has('x-1')).toBe(false);
    expect(await metric('opspad_batches_abandoned_total', { operation_type: 'stubborn', reason: 'cancelled' })).toBe(1);
    // The handler's batchTimeoutMs (1 h) replaced OPSPAD_BATCH_TIMEOUT (2 s): no timeout fired.
    expect(await metric('opspad_batches_abandoned_total', { operation_type: 'stubborn', reason: 'timeout' })).toBe(0);
  });

  it('fails an item the budget cuts short once it has been leased `attempts` times, instead of handing it out forever', async () => {
    const conversation = randomUUID();
    const created = await tenant.op(conversation, {
      action: 'create',
      operation_type: 'slowpoke',
      total_items: 2,
      item_ids: ['p-1', 'p-2'],
      batch_size: 2,
    });
    const operationId = created.body.operation_id as string;
    const end = await waitForProgress(harness.url, tenant, operationId, finished);
    expect(end).toMatchObject({ status: 'completed', completed_count: 0, failed_count: 2 });
    const failed = await harness.db.query<{ item_id: string; reason: string; attempts: number }>(
      `SELECT item_id, reason, attempts FROM assistant_operation_item WHERE operation_id = $1 ORDER BY ordinal`,
      [operationId],
    );
    // One lane. p-1 is cut short in the first two batches (p-2 waits behind it, unstarted, and is
    // given back with it) and fails at its second lease; p-2 is cut short in the third batch, its
    // third lease. Leases count, whether or not the item was started in them.
    expect(failed.map((row) => [row.item_id, row.attempts, row.reason])).toEqual([
      ['p-1', 2, 'no result within the batch time budget (300 ms) in 2 tries'],
      ['p-2', 3, 'no result within the batch time budget (300 ms) in 3 tries'],
    ]);
    expect(await metric('opspad_batches_abandoned_total', { operation_type: 'slowpoke' })).toBe(0);
  });
});

describe.each(QUEUE_BACKENDS)('closing the worker pool (postgres database, %s queue)', (queue) => {
  it('does not wait for a handler that ignores the shutdown: its items go back to pending', async () => {
    const entered = gate();
    const hang: ItemHandler = {
      type: 'hang',
      async handle() {
        entered.resolve();
        await new Promise(() => {});
      },
    };
    // The API (and its dispatcher) in one harness; the worker pool under test started by hand.
    const api = await startHarness('postgres', {
      queue,
      workers: false,
      handlers: [hang],
      env: { ...BUDGET, ...QUIET },
    });
    const metrics = createMetrics();
    const pool = await startWorkerPool({
      db: api.db,
      handlers: createHandlerRegistry([hang]),
      dispatcher: api.service.dispatcher,
      logger: createLogger('silent'),
      metrics,
      backend: api.service.queueBackend,
      queuePrefix: api.prefix,
      leaseTtlMs: 10_000,
      jobLockTtlMs: 3_000,
      batchTimeoutMs: 3_600_000,
      batchGraceMs: 200,
    });
    try {
      const tenant = await api.newTenant();
      const conversation = randomUUID();
      const created = await tenant.op(conversation, {
        action: 'create',
        operation_type: 'hang',
        total_items: 2,
        item_ids: ids(2),
        batch_size: 2,
      });
      await entered.promise;
      await pool.close(100);
      expect(await metricValue([metrics], 'opspad_batches_abandoned_total', { reason: 'shutdown' })).toBe(1);
      const after = await tenant.op(conversation, { action: 'get', operation_id: created.body.operation_id });
      expect(after.body).toMatchObject({ status: 'active', remaining_count: 2, in_flight_count: 0 });
    } finally {
      await pool.close();
      await api.close();
    }
  });
});
