/**
 * Fair share of the fleet, on real Postgres with the jobs in Redis and then in Postgres, with a
 * handler passed in code (the Postgres store's decision is checked in queue-backend.test.ts):
 * - organization A's operation against a listener that never answers does not delay organization
 *   B's one-item operation beyond one batch budget, in one worker process and across two;
 * - the Redis script that decides, for the whole fleet, agrees with the rule in
 *   domain/fair-share.ts, with and without fair-share weights.
 * Orderings are asserted through what the handler saw, never through timing.
 */
import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { mayStart } from '../../src/domain/fair-share.ts';
import type { ItemHandler } from '../../src/handlers/types.ts';
import { BatchTimeoutError } from '../../src/queue/batch-budget.ts';
import { fairShareKeys, redisFairShareStore } from '../../src/queue/fair-share-redis.ts';
import { BUDGET, metricValue, QUIET, silentListener } from '../helpers/fair-share.ts';
import { fileQueuePrefix } from '../helpers/file-database.ts';
import { type Harness, harnessPrefix, ids, QUEUE_BACKENDS, startHarness } from '../helpers/harness.ts';
import { testKey } from '../helpers/redis.ts';
import { eventually, finished, waitForProgress } from '../helpers/wait.ts';

describe.each(
  QUEUE_BACKENDS.flatMap((queue) => [
    { topology: 'one worker process with 2 slots', processes: 1, slots: 2, queue },
    { topology: 'two worker processes with 1 slot each', processes: 2, slots: 1, queue },
  ]),
)('fair share: $topology, $queue queue', ({ processes, slots, queue }) => {
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
          queue,
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

describe('the fleet-wide decision in Redis', () => {
  let redis: Redis;
  beforeAll(() => {
    redis = new Redis(inject('redisUrl'));
  });
  afterEach(async () => {
    const keys = await redis.keys(`${fileQueuePrefix()}-lua-*`);
    if (keys.length > 0) {
      await redis.del(...keys);
    }
  });
  afterAll(() => {
    redis.disconnect();
  });

  const ORGS = ['org-a', 'org-b', 'org-c', 'org-d'];

  it('agrees with mayStart on every state and every weight, and refuses to decide on a view older than the last arrival', async () => {
    const state = fc.record({
      workers: fc.array(fc.integer({ min: 1, max: 4 }), { minLength: 1, maxLength: 3 }),
      running: fc.dictionary(fc.constantFrom(...ORGS), fc.integer({ min: 0, max: 4 })),
      waiting: fc.dictionary(fc.constantFrom(...ORGS), fc.integer({ min: 1, max: 6 })),
      // Weights from 1 to 100; unweighted states (every weight 1) are drawn as often, and skewed
      // ones, whose floors of 1 make the guarantees add up to more than the slots.
      weights: fc.oneof(
        fc.constant({}),
        fc.dictionary(fc.constantFrom(...ORGS), fc.integer({ min: 1, max: 100 })),
        fc.dictionary(fc.constantFrom(...ORGS), fc.integer({ min: 1, max: 4 })),
        fc.dictionary(fc.constantFrom(...ORGS), fc.constantFrom(1, 100), { minKeys: 2 }),
      ),
      candidate: fc.constantFrom(...ORGS),
    });
    await fc.assert(
      fc.asyncProperty(state, async ({ workers, running, waiting, weights, candidate }) => {
        const base = testKey('lua');
        const keys = fairShareKeys(base, 'lua');
        const store = redisFairShareStore({
          commands: () => redis,
          producer: redis,
          prefix: base,
          operationType: 'lua',
        });
        const expiry = Date.now() + 60_000;
        for (const [index, slots] of workers.entries()) {
          await redis.zadd(keys.workers, expiry, `w${index} ${slots}`);
        }
        for (const [org, count] of Object.entries(running)) {
          for (let batch = 0; batch < count; batch++) {
            await redis.zadd(keys.running, expiry, `${org} job-${batch}`);
          }
        }
        // An expired entry and an expired worker are ignored.
        await redis.zadd(keys.running, 1, `${candidate} long-dead`);
        await redis.zadd(keys.workers, 1, 'dead 100');
        await redis.set(keys.arrivals, '7');
        const weightOf = (org: string) => (weights as Record<string, number>)[org] ?? 1;
        const view = Object.entries(waiting).map(([org, lanes]) => [org, lanes, weightOf(org)] as const);
        const request = (organizationId: string, arrivals: string) => ({
          now: Date.now(),
          organizationId,
          member: `${organizationId} new-job`,
          expiry,
          arrivals,
          waiting: view,
          weight: weightOf(organizationId),
        });
        const expected = (organizationId: string, extraSlots: number) =>
          mayStart(
            {
              slots: workers.reduce((sum, slots) => sum + slots, extraSlots),
              running: new Map(Object.entries(running)),
              waiting: new Map(Object.entries(waiting)),
              weights: new Map(ORGS.map((org) => [org, weightOf(org)])),
            },
            organizationId,
          );

        expect(await store.acquire(request(candidate, '6'))).toEqual({ code: -1, arrivals: '7' });
        const first = expected(candidate, 0);
        expect((await store.acquire(request(candidate, '7'))).code).toBe(first ? 1 : 0);
        expect(await redis.zscore(keys.running, `${candidate} new-job`)).toBe(first ? String(expiry) : null);
        await redis.zrem(keys.running, `${candidate} new-job`);
        // Every organization, listed or not, on the same view (its kept sums, and the totals an
        // unlisted one adds), then on more slots (sums for them).
        for (const extraSlots of [0, 3]) {
          if (extraSlots > 0) {
            await redis.zadd(keys.workers, expiry, `extra ${extraSlots}`);
          }
          for (const org of ORGS) {
            const { code } = await store.acquire(request(org, '7'));
            expect(code, `${org} with ${extraSlots} more slots`).toBe(expected(org, extraSlots) ? 1 : 0);
            await redis.zrem(keys.running, `${org} new-job`);
          }
        }
        // One view published for every decision.
        expect(await redis.keys(keys.view('*'))).toHaveLength(1);
        await redis.del(...(await redis.keys(`${base}*`)));
      }),
      {
        numRuns: 300,
        // Floors that overcommit the slots, with another waiting organization running: the
        // branch that counts the waiting organizations running nothing.
        examples: [
          [
            {
              workers: [3, 3],
              running: { 'org-d': 1, 'org-a': 2 },
              waiting: { 'org-b': 1, 'org-a': 1, 'org-c': 1 },
              weights: { 'org-d': 6 },
              candidate: 'org-d',
            },
          ],
        ],
      },
    );
  });
  it('sends each view once, whatever the decisions it serves, again when it is gone, and keeps one view a process', async () => {
    const base = testKey('lua');
    const keys = fairShareKeys(base, 'lua');
    const store = redisFairShareStore({ commands: () => redis, producer: redis, prefix: base, operationType: 'lua' });
    await redis.zadd(keys.workers, Date.now() + 60_000, 'w0 8');
    await redis.set(keys.arrivals, '3');
    const viewOf = (count: number) => Array.from({ length: count }, (_, i) => [`org-${i}`, 2, 1] as const);
    const decide = async (waiting: ReturnType<typeof viewOf>, job: number) => {
      const member = `org-0 job-${job}`;
      const { code } = await store.acquire({
        now: Date.now(),
        organizationId: 'org-0',
        member,
        expiry: Date.now() + 60_000,
        arrivals: '3',
        waiting,
      });
      await redis.zrem(keys.running, member);
      return code;
    };
    const large = viewOf(2_000);
    const views = async () =>
      Object.fromEntries(
        await Promise.all(
          (await redis.keys(keys.view('*'))).map(
            async (key) => [await redis.hlen(key), (await redis.pttl(key)) <= 5_000] as const,
          ),
        ),
      );
    for (let job = 0; job < 20; job++) {
      expect(await decide(large, job)).toBe(1);
    }
    // 2,000 entries, the count, the weight sum and the sums of one slots-and-weight pair: sent once.
    expect(await views()).toEqual({ 2003: false });
    // A view gone from Redis (expired, or Redis restarted empty) is sent again, and decides.
    await redis.del(...(await redis.keys(keys.view('*'))));
    expect(await decide(large, 20)).toBe(1);
    expect(await views()).toEqual({ 2003: false });
    // The next view: the one before is left a few seconds, and a decision holding it still decides.
    expect(await decide(viewOf(3), 20)).toBe(1);
    expect(await views()).toEqual({ 2003: true, 6: false });
    expect(await decide(large, 21)).toBe(1);
    await store.unregister({ id: 'w0', slots: 8 });
    expect(await views()).toEqual({ 2003: true });
    await redis.del(...(await redis.keys(`${base}*`)));
  });
});
