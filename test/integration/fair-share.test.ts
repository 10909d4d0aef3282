/**
 * Fair share of the fleet and batch time budgets, on real Postgres and Redis with handlers passed
 * in code:
 * - organization A's operation against a listener that never answers does not delay organization
 *   B's one-item operation beyond one batch budget, in one process and across two;
 * - a handler that ignores its signal loses its slot after the grace period; what it finished is
 *   recorded, and a well-behaved retry finishes the rest; its late rejection changes nothing;
 * - cancel frees a slot held by such a handler the same way (and a handler's own batchTimeoutMs
 *   replaces OPSPAD_BATCH_TIMEOUT);
 * - the worker pool's close does not wait for a handler that ignores the shutdown;
 * - the Redis script that decides, fleet-wide, agrees with the rule in domain/fair-share.ts.
 * Orderings are asserted through what the handlers and the database saw, never through timing.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import fc from 'fast-check';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { mayStart } from '../../src/domain/fair-share.ts';
import { createHandlerRegistry } from '../../src/handlers/registry.ts';
import type { ItemHandler } from '../../src/handlers/types.ts';
import { createLogger } from '../../src/logger.ts';
import { createMetrics, type Metrics } from '../../src/metrics.ts';
import { BatchTimeoutError } from '../../src/queue/batch-budget.ts';
import { ACQUIRE_LUA } from '../../src/queue/fair-share.ts';
import { startWorkerPool } from '../../src/queue/worker-pool.ts';
import { type Harness, harnessPrefix, ids, startHarness, type Tenant } from '../helpers/harness.ts';
import { testKey } from '../helpers/redis.ts';
import { eventually, finished, waitForProgress } from '../helpers/wait.ts';

const BUDGET = { OPSPAD_BATCH_TIMEOUT: '2s', OPSPAD_BATCH_GRACE: '300ms' };
const QUIET = { OPSPAD_LEASE_TTL: '10s', OPSPAD_JOB_LOCK_TTL: '3s', OPSPAD_RECONCILE_INTERVAL: '1h' };

/** A metric's value for the given labels, summed over every registry given (0 when absent). */
async function metricValue(registries: Metrics[], name: string, labels: Record<string, string>): Promise<number> {
  let total = 0;
  for (const metrics of registries) {
    const metric = metrics.registry.getSingleMetric(name);
    const values = metric ? (await metric.get()).values : [];
    for (const value of values) {
      if (Object.entries(labels).every(([key, wanted]) => String(value.labels[key]) === wanted)) {
        total += value.value;
      }
    }
  }
  return total;
}

/** A promise the test settles by hand. */
function gate<T = void>() {
  let resolve: (value: T) => void = () => {};
  let reject: (error: Error) => void = () => {};
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** A loopback HTTP server that accepts every request and never answers. */
async function silentListener(): Promise<{ url: string; requests: () => number; close(): Promise<void> }> {
  let requests = 0;
  const server: Server = createServer(() => {
    requests++; // …and never respond
  });
  server.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    requests: () => requests,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

describe.each([
  { topology: 'one worker process with 2 slots', processes: 1, slots: 2 },
  { topology: 'two worker processes with 1 slot each', processes: 2, slots: 1 },
])('fair share: $topology', ({ processes, slots }) => {
  const fleetSlots = processes * slots;
  let listener: Awaited<ReturnType<typeof silentListener>>;
  let harnesses: Harness[] = [];
  /** What the handler saw, in order. */
  const seen = { aStarted: 0, aOutOfBudget: 0, bHandled: [] as { aStarted: number; aOutOfBudget: number }[] };

  // POSTs the item to query_params.url, honouring ctx.signal as a well-written webhook does; an
  // operation without a url completes at once.
  const post: ItemHandler = {
    type: 'post',
    concurrency: slots,
    attempts: 1,
    async handle(itemId, ctx) {
      const url = ctx.queryParams.url;
      if (typeof url !== 'string') {
        seen.bHandled.push({ aStarted: seen.aStarted, aOutOfBudget: seen.aOutOfBudget });
        return;
      }
      seen.aStarted++;
      try {
        await fetch(url, { method: 'POST', body: JSON.stringify({ itemId }), signal: ctx.signal });
      } catch (error) {
        if (ctx.signal.reason instanceof BatchTimeoutError) {
          seen.aOutOfBudget++;
        }
        throw error;
      }
    },
  };

  beforeAll(async () => {
    listener = await silentListener();
    const prefix = harnessPrefix();
    for (let index = 0; index < processes; index++) {
      harnesses.push(
        await startHarness('postgres', {
          workers: true,
          handlers: [post],
          env: { ...BUDGET, ...QUIET, OPSPAD_QUEUE_PREFIX: prefix },
        }),
      );
    }
  });
  afterAll(async () => {
    await Promise.all(harnesses.map((harness) => harness.close()));
    harnesses = [];
    await listener.close();
  });

  it("A's operation against a listener that never answers does not delay B's small operation beyond one batch budget", async () => {
    const harness = harnesses[0] as Harness;
    const a = await harness.newTenant();
    const b = await harness.newTenant();
    // Four lanes of A: as many as the fleet has slots run (and hang), the rest queue ahead of B.
    const aConversation = randomUUID();
    const aCreated = await a.op(aConversation, {
      action: 'create',
      operation_type: 'post',
      total_items: 8,
      item_ids: ids(8, 'a'),
      batch_size: 1,
      max_parallel_batches: 4,
      query_params: { url: listener.url },
    });
    expect(aCreated.status, JSON.stringify(aCreated.body)).toBe(200);
    await eventually(async () => (listener.requests() >= fleetSlots ? true : undefined), {
      what: "A's first batches to hold every slot",
    });
    expect(seen.aOutOfBudget).toBe(0);

    const bCreated = await b.op(randomUUID(), {
      action: 'create',
      operation_type: 'post',
      total_items: 1,
      item_ids: ['b-1'],
    });
    expect(bCreated.status, JSON.stringify(bCreated.body)).toBe(200);
    const bEnd = await waitForProgress(harness.url, b, bCreated.body.operation_id as string, finished);
    expect(bEnd).toMatchObject({ status: 'completed', completed_count: 1 });

    // B was handled as soon as the first slot freed: before any batch of A started after that
    // ran out its budget. Without fair sharing, A's queued lanes take the freed slots first, and
    // B waits for them to run out a second budget (aOutOfBudget would be 2 × fleetSlots).
    expect(seen.bHandled).toHaveLength(1);
    expect(seen.bHandled[0]?.aOutOfBudget).toBeLessThanOrEqual(fleetSlots);
    expect(seen.bHandled[0]?.aStarted).toBeLessThanOrEqual(2 * fleetSlots - 1);
    // A's queued jobs were parked rather than run.
    const metrics = harnesses.map((h) => h.service.metrics);
    expect(await metricValue(metrics, 'opspad_batches_deferred_total', { operation_type: 'post' })).toBeGreaterThan(0);

    await a.op(aConversation, { action: 'cancel', operation_id: aCreated.body.operation_id });
  });
});

describe('batch budgets (postgres, redis)', () => {
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

describe('closing the worker pool (postgres, redis)', () => {
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
    const api = await startHarness('postgres', { workers: false, handlers: [hang], env: { ...BUDGET, ...QUIET } });
    const metrics = createMetrics();
    const pool = await startWorkerPool({
      db: api.db,
      handlers: createHandlerRegistry([hang]),
      dispatcher: api.service.dispatcher,
      logger: createLogger('silent'),
      metrics,
      redisUrl: inject('redisUrl'),
      prefix: api.service.dispatcher.queues[0]?.opts.prefix as string,
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

describe('the fleet-wide decision in Redis', () => {
  let redis: Redis;
  beforeAll(() => {
    redis = new Redis(inject('redisUrl'));
  });
  afterEach(async () => {
    const keys = await redis.keys(`${inject('queuePrefix')}-lua-*`);
    if (keys.length > 0) {
      await redis.del(...keys);
    }
  });
  afterAll(() => {
    redis.disconnect();
  });

  const ORGS = ['org-a', 'org-b', 'org-c', 'org-d'];

  it('agrees with mayStart on every state, and refuses to decide on a view older than the last arrival', async () => {
    const state = fc.record({
      workers: fc.array(fc.integer({ min: 1, max: 4 }), { minLength: 1, maxLength: 3 }),
      running: fc.dictionary(fc.constantFrom(...ORGS), fc.integer({ min: 0, max: 4 })),
      waiting: fc.dictionary(fc.constantFrom(...ORGS), fc.integer({ min: 1, max: 6 })),
      candidate: fc.constantFrom(...ORGS),
    });
    await fc.assert(
      fc.asyncProperty(state, async ({ workers, running, waiting, candidate }) => {
        const base = testKey('lua');
        const [runningKey, workersKey, arrivalsKey] = [`${base}:running`, `${base}:workers`, `${base}:arrivals`];
        const expiry = Date.now() + 60_000;
        for (const [index, slots] of workers.entries()) {
          await redis.zadd(workersKey, expiry, `w${index} ${slots}`);
        }
        for (const [org, count] of Object.entries(running)) {
          for (let batch = 0; batch < count; batch++) {
            await redis.zadd(runningKey, expiry, `${org} job-${batch}`);
          }
        }
        // An expired entry and an expired worker are ignored.
        await redis.zadd(runningKey, 1, `${candidate} long-dead`);
        await redis.zadd(workersKey, 1, 'dead 100');
        await redis.set(arrivalsKey, '7');
        const args = [Date.now(), candidate, `${candidate} new-job`, expiry];
        const view = Object.entries(waiting).flat();

        const stale = (await redis.eval(
          ACQUIRE_LUA,
          3,
          runningKey,
          workersKey,
          arrivalsKey,
          ...args,
          '6',
          ...view,
        )) as [number, string];
        expect(stale).toEqual([-1, '7']);

        const [code] = (await redis.eval(
          ACQUIRE_LUA,
          3,
          runningKey,
          workersKey,
          arrivalsKey,
          ...args,
          '7',
          ...view,
        )) as [number, string];
        const expected = mayStart(
          {
            slots: workers.reduce((sum, slots) => sum + slots, 0),
            running: new Map(Object.entries(running)),
            waiting: new Map(Object.entries(waiting)),
          },
          candidate,
        );
        expect(code).toBe(expected ? 1 : 0);
        expect(await redis.zscore(runningKey, `${candidate} new-job`)).toBe(expected ? String(expiry) : null);
        await redis.del(runningKey, workersKey, arrivalsKey);
      }),
      { numRuns: 150 },
    );
  });
});
