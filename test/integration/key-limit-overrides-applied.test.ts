/**
 * An organization's key-limit overrides reach the workers (main.ts hands the store's
 * keyLimitOverride to the worker pool), on both queue backends: a handler allowing 4 items in
 * flight per key runs one organization's work at the 1 its operator set for every key, and one
 * of its keys at the 2 set for that key alone, while another organization — whose operation
 * names the same account — keeps the handler's 4. Peaks are counted by the handler itself.
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ItemHandler } from '../../src/handlers/types.ts';
import { QUIET } from '../helpers/fair-share.ts';
import { type Harness, ids, QUEUE_BACKENDS, startHarness, type Tenant } from '../helpers/harness.ts';
import { finished, waitForProgress } from '../helpers/wait.ts';

const HANDLER_CONCURRENCY = 4;

describe.each(QUEUE_BACKENDS)('key-limit overrides applied by the workers (%s queue)', (queue) => {
  let harness: Harness;
  /** Items in flight now and at most, by `<organization> <account>`. */
  const inFlight = new Map<string, { now: number; peak: number }>();

  const crm: ItemHandler = {
    type: 'overridden_crm',
    concurrency: 8,
    itemConcurrency: 2,
    batchSize: 2,
    attempts: 1,
    limits: {
      key: (operation) => (typeof operation.queryParams.account === 'string' ? operation.queryParams.account : ''),
      concurrency: HANDLER_CONCURRENCY,
    },
    async handle(_itemId, ctx) {
      const id = `${ctx.organizationId} ${String(ctx.queryParams.account ?? '')}`;
      const count = inFlight.get(id) ?? { now: 0, peak: 0 };
      inFlight.set(id, count);
      count.now++;
      count.peak = Math.max(count.peak, count.now);
      try {
        await sleep(15);
      } finally {
        count.now--;
      }
    },
  };

  beforeAll(async () => {
    harness = await startHarness('postgres', { queue, workers: true, handlers: [crm], env: QUIET });
  });
  afterAll(async () => {
    await harness?.close();
  });

  const nameOf = async (tenant: Tenant) =>
    (
      await harness.db.query<{ name: string }>('SELECT name FROM organization WHERE id = $1', [tenant.organizationId])
    )[0]?.name as string;

  const run = async (tenant: Tenant, account: string) => {
    const created = await tenant.op(randomUUID(), {
      action: 'create',
      operation_type: 'overridden_crm',
      total_items: 40,
      item_ids: ids(40, account),
      batch_size: 2,
      max_parallel_batches: 8,
      query_params: { account },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    return waitForProgress(harness.url, tenant, created.body.operation_id as string, finished);
  };

  it("holds an organization's keys to its own figures, and no other organization's", async () => {
    const limited = await harness.newTenant();
    const other = await harness.newTenant();
    const set = await harness.request(`/admin/organizations/${encodeURIComponent(await nameOf(limited))}/limits`, {
      method: 'PUT',
      headers: { authorization: harness.adminAuthorization, 'content-type': 'application/json' },
      body: JSON.stringify({
        key_limits: [
          { operation_type: 'overridden_crm', key: null, concurrency: 1 },
          { operation_type: 'overridden_crm', key: 'acct-2', concurrency: 2 },
        ],
      }),
    });
    expect(set.status, JSON.stringify(set.body)).toBe(200);

    const ends = await Promise.all([run(limited, 'acct-1'), run(limited, 'acct-2'), run(other, 'acct-1')]);
    for (const end of ends) {
      expect(end).toMatchObject({ status: 'completed', completed_count: 40 });
    }
    const peak = (tenant: Tenant, account: string) => inFlight.get(`${tenant.organizationId} ${account}`)?.peak;
    expect(peak(limited, 'acct-1')).toBe(1);
    expect(peak(limited, 'acct-2')).toBe(2);
    // The same account named by another organization is another key, with the handler's figure.
    expect(peak(other, 'acct-1')).toBeGreaterThan(2);
    expect(peak(other, 'acct-1')).toBeLessThanOrEqual(HANDLER_CONCURRENCY);
  });
});
