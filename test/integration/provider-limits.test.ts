/**
 * Provider limits per key (a handler's `limits`), end to end on Postgres with the jobs in Redis
 * and then in Postgres, run by two worker services sharing one queue prefix (as two processes
 * of a fleet do; the handlers' counters are shared, so they see the fleet):
 * - a rate per organization: two organizations on one handler limited to 20 items/s each get
 *   their own 20/s, measured from the ledger (each item's recorded time, `updated_at`);
 * - a rate per key with an organization's override: its account with an override of 60/s gets
 *   60, another of its accounts keeps the handler's 20, at the same time;
 * - a concurrency per key: the handler's own counter of items in flight for the key never
 *   passes 3, while the fleet's slots would allow far more;
 * - a key at its limit holds no slot: another account's operation of the same organization
 *   finishes while the throttled one (with more lanes than the fleet has slots) still runs;
 * - the throttled state reaches `get` and the context fragment, and a throttled operation is not
 *   counted as waiting for the fair share's slots.
 *
 * The measured rate is the steady one: the items after the bucket's first burst (`max`), over
 * the time from the first recorded item to the last. Tolerance: within −25 % / +20 % of the
 * limit — a limit shared by both organizations would give each half, and no limit many times it.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ItemHandler } from '../../src/handlers/types.ts';
import { listWaitingOrganizations, setKeyLimit } from '../../src/store/index.ts';
import { QUIET } from '../helpers/fair-share.ts';
import { type Harness, harnessPrefix, ids, QUEUE_BACKENDS, startHarness, type Tenant } from '../helpers/harness.ts';
import { eventually, finished, waitForProgress } from '../helpers/wait.ts';

const RATE = 20;

/** Items per second an operation recorded after its first burst of `burst`, from the ledger. */
async function steadyRate(harness: Harness, operationId: string, burst: number): Promise<number> {
  const [row] = await harness.db.query<{ n: number; span_s: number }>(
    `SELECT count(*)::int AS n, extract(epoch FROM max(updated_at) - min(updated_at))::float8 AS span_s
     FROM assistant_operation_item WHERE operation_id = $1 AND status = 'completed'`,
    [operationId],
  );
  return ((row?.n ?? 0) - burst) / (row?.span_s ?? 1);
}

describe.each(QUEUE_BACKENDS)('provider limits per key (%s queue)', (queue) => {
  let harness: Harness;
  let second: Harness;
  const inFlight = new Map<string, { now: number; peak: number }>();

  /** 20 items/s per organization, or per `query_params.account` when the operation names one. */
  const sms: ItemHandler = {
    type: 'limited_sms',
    concurrency: 4,
    batchSize: 5,
    attempts: 1,
    limits: {
      key: (operation) =>
        typeof operation.queryParams.account === 'string' ? `account-${operation.queryParams.account}` : '',
      rate: { max: RATE, durationMs: 1000 },
    },
    async handle() {},
  };
  /** At most 3 items in flight per organization, counted by the handler itself. */
  const crm: ItemHandler = {
    type: 'limited_crm',
    concurrency: 8,
    itemConcurrency: 2,
    batchSize: 2,
    attempts: 1,
    limits: { concurrency: 3 },
    async handle(_itemId, ctx) {
      const count = inFlight.get(ctx.organizationId) ?? { now: 0, peak: 0 };
      inFlight.set(ctx.organizationId, count);
      count.now++;
      count.peak = Math.max(count.peak, count.now);
      try {
        await new Promise<void>((resolve) => setTimeout(resolve, 15));
      } finally {
        count.now--;
      }
    },
  };

  beforeAll(async () => {
    const env = { ...QUIET, OPSPAD_QUEUE_PREFIX: harnessPrefix() };
    harness = await startHarness('postgres', { queue, workers: true, handlers: [sms, crm], env });
    second = await startHarness('postgres', { queue, workers: true, handlers: [sms, crm], env });
  });
  afterAll(async () => {
    await Promise.all([harness?.close(), second?.close()]);
  });

  async function create(tenant: Tenant, input: Record<string, unknown>): Promise<string> {
    const items = input.item_ids as string[];
    const created = await tenant.op(randomUUID(), {
      action: 'create',
      execution: 'background',
      total_items: items.length,
      ...input,
    });
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    return created.body.operation_id as string;
  }

  it('gives each organization its own rate', async () => {
    const [a, b] = [await harness.newTenant(), await harness.newTenant()];
    const operations = await Promise.all(
      [a, b].map((tenant) => create(tenant, { operation_type: 'limited_sms', item_ids: ids(60), batch_size: 5 })),
    );
    for (const [index, tenant] of [a, b].entries()) {
      const end = await waitForProgress(harness.url, tenant, operations[index] as string, finished);
      expect(end.completed_count).toBe(60);
    }
    for (const operationId of operations) {
      const rate = await steadyRate(harness, operationId, RATE);
      expect(rate).toBeGreaterThan(RATE * 0.75);
      expect(rate).toBeLessThan(RATE * 1.2);
    }
  });

  it("gives an account its organization's override, and another account the handler's rate", async () => {
    const tenant = await harness.newTenant();
    await setKeyLimit(harness.db, tenant.organizationId, {
      operation_type: 'limited_sms',
      key: 'account-big',
      rate: { max: 3 * RATE, interval_ms: 1000 },
    });
    const [big, small] = await Promise.all([
      create(tenant, {
        operation_type: 'limited_sms',
        item_ids: ids(180),
        batch_size: 5,
        query_params: { account: 'big' },
      }),
      create(tenant, {
        operation_type: 'limited_sms',
        item_ids: ids(60),
        batch_size: 5,
        query_params: { account: 'small' },
      }),
    ]);
    for (const operationId of [big, small]) {
      const end = await waitForProgress(harness.url, tenant, operationId as string, finished);
      expect(end.status).toBe('completed');
    }
    const bigRate = await steadyRate(harness, big, 3 * RATE);
    expect(bigRate).toBeGreaterThan(3 * RATE * 0.75);
    expect(bigRate).toBeLessThan(3 * RATE * 1.2);
    const smallRate = await steadyRate(harness, small, RATE);
    expect(smallRate).toBeGreaterThan(RATE * 0.75);
    expect(smallRate).toBeLessThan(RATE * 1.2);
  });

  it('never lets more than a key’s concurrency be in flight', async () => {
    const tenant = await harness.newTenant();
    const operationId = await create(tenant, {
      operation_type: 'limited_crm',
      item_ids: ids(40),
      batch_size: 2,
      max_parallel_batches: 8,
    });
    const end = await waitForProgress(harness.url, tenant, operationId, finished);
    expect(end.completed_count).toBe(40);
    const peak = inFlight.get(tenant.organizationId)?.peak ?? 0;
    // 2 services × 8 slots × 2 items a batch would allow 32; the key allows 3, and is used to it.
    expect(peak).toBeLessThanOrEqual(3);
    expect(peak).toBeGreaterThanOrEqual(2);
  });

  it('holds the concurrency when records lease nothing next (an operation with a failure-rate breaker)', async () => {
    // With max_failure_rate every record takes the general path, which never leases the lane's
    // next batch: each batch of a slice then asks its key again.
    const tenant = await harness.newTenant();
    const operationId = await create(tenant, {
      operation_type: 'limited_crm',
      item_ids: ids(40),
      batch_size: 2,
      max_parallel_batches: 8,
      max_failure_rate: 0.9,
    });
    const end = await waitForProgress(harness.url, tenant, operationId, finished);
    expect(end.completed_count).toBe(40);
    expect(inFlight.get(tenant.organizationId)?.peak ?? 0).toBeLessThanOrEqual(3);
  });

  it("parks a key at its limit without holding a slot another key's work could use", async () => {
    // 16 lanes of a throttled account against 2 services × 4 slots: were its parked batches
    // to keep their slots, another account's operation would wait for all of it to finish.
    const tenant = await harness.newTenant();
    const throttled = await create(tenant, {
      operation_type: 'limited_sms',
      item_ids: ids(200),
      batch_size: 5,
      max_parallel_batches: 16,
      query_params: { account: 'slow' },
    });
    const other = await create(tenant, {
      operation_type: 'limited_sms',
      item_ids: ids(10),
      batch_size: 5,
      query_params: { account: 'other' },
    });
    const end = await waitForProgress(harness.url, tenant, other, finished);
    expect(end.completed_count).toBe(10);
    const [row] = await harness.db.query<{ status: string; completed_count: number }>(
      'SELECT status, completed_count FROM assistant_operation WHERE id = $1',
      [throttled],
    );
    expect(row?.status).toBe('active');
    expect(row?.completed_count).toBeLessThan(200);
  });

  it('tells the assistant its operation is throttled', async () => {
    const tenant = await harness.newTenant();
    const conversation = randomUUID();
    const created = await tenant.op(conversation, {
      action: 'create',
      execution: 'background',
      operation_type: 'limited_sms',
      total_items: 200,
      item_ids: ids(200),
      batch_size: 5,
    });
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    const operationId = created.body.operation_id as string;
    const throttled = await eventually(async () => {
      const got = await tenant.op(conversation, { action: 'get', operation_id: operationId });
      return got.body.throttled ? got.body : undefined;
    });
    expect(throttled.throttled).toMatchObject({ limited_by: 'rate', rate: { max: RATE, interval_ms: 1000 } });
    expect(String(throttled.next)).toMatch(/20 items per second/);
    // Its organization has no other work: it does not hold a slot back in the fair share.
    const view = await listWaitingOrganizations(harness.db, {
      operationType: 'limited_sms',
      queuePrefix: harness.prefix,
      batchSize: 5,
    });
    expect(view.weights.has(tenant.organizationId)).toBe(true);
    expect(view.waiting.map(([organization]) => organization)).not.toContain(tenant.organizationId);
    const context = await tenant.context(conversation);
    expect(context.body.text).toMatch(/throttled/i);
    expect(context.body.text).toMatch(/20 items per second/);
    await tenant.op(conversation, { action: 'cancel', operation_id: operationId });
  });
});
