/**
 * opspad on a real Redis Cluster of three masters (test/helpers/redis-cluster.ts): an API in
 * this process and `opspad worker` child processes, all given REDIS_CLUSTER_NODES, run
 * background operations of two organizations at once (the fleet's fair share is a multi-key
 * script), survive a worker SIGKILLed mid-run with nothing lost or recorded twice, and stop a
 * batch in flight on pause and on cancel (the control channel's pub/sub crosses the cluster).
 * Every key opspad writes carries the `{<prefix>}` hash tag, so all of them live in one slot.
 *
 * Side effects (one HINCRBY per handled item, test/fixtures/counting-handler.ts) go to the run's
 * ordinary Redis, apart from the cluster.
 */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { closeCountingClient, countingHandler, sideEffects } from '../fixtures/counting-handler.ts';
import { type Harness, harnessPrefix, ids, startHarness, type Tenant } from '../helpers/harness.ts';
import { killAllChildren, RUN_TIMEOUT_MS, type Spawned, startWorker } from '../helpers/processes.ts';
import { testKey } from '../helpers/redis.ts';
import { type RedisClusterUnderTest, startRedisCluster } from '../helpers/redis-cluster.ts';
import { eventually, finished, waitForProgress } from '../helpers/wait.ts';

let cluster: RedisClusterUnderTest | undefined;
const harnesses: Harness[] = [];

beforeAll(async () => {
  cluster = await startRedisCluster();
}, 90_000);

afterEach(async () => {
  await killAllChildren();
  for (const harness of harnesses.splice(0)) {
    await harness.close();
  }
});

afterAll(async () => {
  closeCountingClient();
  await cluster?.stop();
});

/** The settings that put an opspad on the cluster (REDIS_URL emptied: it would be refused beside it). */
function clusterEnv(): Record<string, string> {
  return { REDIS_URL: '', REDIS_CLUSTER_NODES: (cluster?.nodes ?? []).join(',') };
}

async function startApi(): Promise<{ harness: Harness; prefix: string }> {
  const prefix = harnessPrefix();
  const harness = await startHarness('postgres', {
    queue: 'redis',
    handlers: [countingHandler],
    env: { ...clusterEnv(), OPSPAD_QUEUE_PREFIX: prefix },
  });
  harnesses.push(harness);
  return { harness, prefix };
}

function startClusterWorker(name: string, prefix: string, env: Record<string, string> = {}): Promise<Spawned> {
  return startWorker(name, prefix, { ...clusterEnv(), ...env }, 'redis');
}

async function createCounting(
  tenant: Tenant,
  options: { items: number; batchSize: number; lanes: number; sidefx: string; extra?: Record<string, unknown> },
  conversation: string = randomUUID(),
): Promise<string> {
  const created = await tenant.op(conversation, {
    action: 'create',
    operation_type: 'counting',
    total_items: options.items,
    item_ids: ids(options.items, 'item'),
    batch_size: options.batchSize,
    max_parallel_batches: options.lanes,
    query_params: { sidefx_key: options.sidefx, latency_ms: 2, ...options.extra },
  });
  expect(created.status, JSON.stringify(created.body)).toBe(200);
  expect(created.body.execution).toBe('background');
  return created.body.operation_id as string;
}

/**
 * The fault suite's audit: every item in exactly one final state, the counters equal to the
 * rows, and the audit trail recording each item once. Returns lost and duplicates.
 */
async function audit(harness: Harness, operationId: string, items: number) {
  const [op] = await harness.db.query<{ status: string; completed_count: number; failed_count: number }>(
    'SELECT status, completed_count, failed_count FROM assistant_operation WHERE id = $1',
    [operationId],
  );
  const states = await harness.db.query<{ status: string; n: number }>(
    'SELECT status, count(*)::int AS n FROM assistant_operation_item WHERE operation_id = $1 GROUP BY status',
    [operationId],
  );
  const byState = Object.fromEntries(states.map((row) => [row.status, row.n]));
  const [events] = await harness.db.query<{ recorded: number }>(
    `SELECT coalesce(sum((data->>'completed')::int + (data->>'failed')::int), 0)::int AS recorded
     FROM operation_event WHERE operation_id = $1 AND kind = 'batch_recorded'`,
    [operationId],
  );
  const finalRows = (byState.completed ?? 0) + (byState.failed ?? 0);
  expect(op?.completed_count).toBe(byState.completed ?? 0);
  expect(op?.failed_count).toBe(byState.failed ?? 0);
  return { status: op?.status, byState, lost: items - finalRows, duplicates: (events?.recorded ?? 0) - finalRows };
}

/** Keys under `prefix` in the run's ordinary Redis (there should be none: the jobs are on the cluster). */
async function keysOnSharedRedis(prefix: string): Promise<number> {
  const redis = new Redis(inject('redisUrl'), { maxRetriesPerRequest: 1 });
  try {
    const [plain, tagged] = await Promise.all([redis.keys(`${prefix}:*`), redis.keys(`{${prefix}}:*`)]);
    return plain.length + tagged.length;
  } finally {
    redis.disconnect();
  }
}

describe('opspad on a Redis Cluster of three masters (real redis-server and opspad worker processes)', () => {
  it('runs two organizations’ operations with exact counts while a worker is SIGKILLed; every key in one slot', {
    timeout: 180_000,
  }, async () => {
    const { harness, prefix } = await startApi();
    expect(harness.service.queueBackend.location).toContain(`(key prefix {${prefix}})`);
    const [victim] = await Promise.all([startClusterWorker('victim', prefix), startClusterWorker('survivor', prefix)]);
    const [first, second] = [await harness.newTenant(), await harness.newTenant()];
    const sidefx = testKey('sidefx');
    const big = 3000;
    const small = 600;
    const bigId = await createCounting(first, { items: big, batchSize: 20, lanes: 4, sidefx });
    const smallId = await createCounting(second, { items: small, batchSize: 20, lanes: 4, sidefx: `${sidefx}-b` });

    const atKill = await waitForProgress(
      harness.url,
      first,
      bigId,
      (p) => p.completed_count >= big / 4 || finished(p),
      RUN_TIMEOUT_MS,
    );
    expect(atKill.status).toBe('active'); // killed mid-run, not after the end
    victim?.process.kill('SIGKILL');
    expect(await victim?.waitForExit()).toEqual({ code: null, signal: 'SIGKILL' });

    const ends = await Promise.all([
      waitForProgress(harness.url, first, bigId, finished, RUN_TIMEOUT_MS),
      waitForProgress(harness.url, second, smallId, finished, RUN_TIMEOUT_MS),
    ]);
    expect(ends.map((end) => [end.status, end.completed_count, end.failed_count, end.in_flight_count])).toEqual([
      ['completed', big, 0, 0],
      ['completed', small, 0, 0],
    ]);
    for (const [operationId, items] of [
      [bigId, big],
      [smallId, small],
    ] as const) {
      const result = await audit(harness, operationId, items);
      expect(result).toEqual({ status: 'completed', byState: { completed: items }, lost: 0, duplicates: 0 });
      console.log(`redis_cluster ${items} items kills=${operationId === bigId ? 1 : 0} lost=0 duplicates=0`);
    }
    // Every item's side effect happened; only the victim's batches in flight can have run twice.
    const effects = await sideEffects(sidefx);
    expect(effects.size).toBe(big);
    expect(Math.min(...effects.values())).toBe(1);
    expect(Math.max(...effects.values())).toBeLessThanOrEqual(2);
    expect([...(await sideEffects(`${sidefx}-b`)).values()].every((count) => count >= 1)).toBe(true);

    // All of this deployment's keys (queues, jobs, fair share, counters) are on one master,
    // in the slot of the hash tag; none went to the ordinary Redis.
    const byNode = await (cluster as RedisClusterUnderTest).keysByNode(`{${prefix}}:`);
    const holders = [...byNode].filter(([, keys]) => keys.length > 0);
    expect(holders.length).toBe(1);
    const keys = holders[0]?.[1] ?? [];
    expect(keys).toContain(`{${prefix}}:batches-counting:meta`);
    expect(keys.some((key) => key.startsWith(`{${prefix}}:batches-counting:fair:`))).toBe(true);
    const slots = new Set(await Promise.all(keys.slice(0, 50).map((key) => cluster?.keySlot(key))));
    expect(slots).toEqual(new Set([await cluster?.keySlot(`{${prefix}}`)]));
    expect(await keysOnSharedRedis(prefix)).toBe(0);
  });

  it('takes over, after a move from one Redis to the cluster, the operations the old Redis held', {
    timeout: 120_000,
  }, async () => {
    // The deployment on one Redis (the run's), with no worker: its operation's jobs wait there.
    const prefix = harnessPrefix();
    const before = await startHarness('postgres', {
      queue: 'redis',
      handlers: [countingHandler],
      env: { OPSPAD_QUEUE_PREFIX: prefix },
    });
    harnesses.push(before);
    const tenant = await before.newTenant();
    const sidefx = testKey('sidefx');
    const items = 300;
    const operationId = await createCounting(tenant, { items, batchSize: 10, lanes: 2, sidefx });
    await before.close();
    harnesses.splice(harnesses.indexOf(before), 1);

    // The same deployment (same OPSPAD_QUEUE_PREFIX) moved to the cluster: its reconciler finds
    // the operation without a live job there and queues it again.
    const after = await startHarness('postgres', {
      queue: 'redis',
      handlers: [countingHandler],
      env: { ...clusterEnv(), OPSPAD_QUEUE_PREFIX: prefix },
    });
    harnesses.push(after);
    await startClusterWorker('worker', prefix);
    const end = await waitForProgress(after.url, tenant, operationId, finished, RUN_TIMEOUT_MS);
    expect(end).toMatchObject({ status: 'completed', completed_count: items, failed_count: 0, in_flight_count: 0 });
    expect(await audit(after, operationId, items)).toMatchObject({ lost: 0, duplicates: 0 });
    const effects = await sideEffects(sidefx);
    expect(effects.size).toBe(items);
    expect([...effects.values()].every((count) => count === 1)).toBe(true);
  });

  it('pauses and resumes an operation to the exact end', { timeout: 120_000 }, async () => {
    const { harness, prefix } = await startApi();
    await startClusterWorker('worker', prefix);
    const tenant = await harness.newTenant();
    const sidefx = testKey('sidefx');
    const items = 800;
    const conversation = randomUUID();
    // 10 ms an item over 2 lanes: about 4 s in all, so the pause lands mid-run.
    const operationId = await createCounting(
      tenant,
      { items, batchSize: 10, lanes: 2, sidefx, extra: { latency_ms: 10 } },
      conversation,
    );

    await waitForProgress(harness.url, tenant, operationId, (p) => p.completed_count >= 50 || finished(p));
    const paused = await tenant.op(conversation, { action: 'pause', operation_id: operationId });
    expect(paused.status, JSON.stringify(paused.body)).toBe(200);
    const held = await waitForProgress(
      harness.url,
      tenant,
      operationId,
      (p) => (p.status === 'paused' && p.in_flight_count === 0) || finished(p),
    );
    expect(held.status).toBe('paused');
    expect(held.completed_count).toBeLessThan(items);
    expect((await sideEffects(sidefx)).size).toBe(held.completed_count);

    const resumed = await tenant.op(conversation, { action: 'resume', operation_id: operationId });
    expect(resumed.status, JSON.stringify(resumed.body)).toBe(200);
    const end = await waitForProgress(harness.url, tenant, operationId, finished, RUN_TIMEOUT_MS);
    expect(end).toMatchObject({ status: 'completed', completed_count: items, failed_count: 0, in_flight_count: 0 });
    expect(await audit(harness, operationId, items)).toMatchObject({ lost: 0, duplicates: 0 });
    const effects = await sideEffects(sidefx);
    expect(effects.size).toBe(items);
    expect([...effects.values()].every((count) => count === 1)).toBe(true);
  });

  it('stops a batch in flight on pause and on cancel through the cluster’s pub/sub', {
    timeout: 120_000,
  }, async () => {
    const { harness, prefix } = await startApi();
    // Only the control channel can end the stuck batch: its budget is far beyond the test.
    await startClusterWorker('worker', prefix, { OPSPAD_BATCH_TIMEOUT: '1h' });
    const tenant = await harness.newTenant();
    const sidefx = testKey('sidefx');
    const items = 200;
    const stuck = 'item-150';
    const conversation = randomUUID();
    const operationId = await createCounting(
      tenant,
      { items, batchSize: 10, lanes: 2, sidefx, extra: { slow_items: [stuck], slow_ms: 3_600_000 } },
      conversation,
    );
    const onlyStuckLeft = (p: { remaining_count: number; in_flight_count: number }) =>
      p.in_flight_count > 0 && p.remaining_count === p.in_flight_count && p.remaining_count <= 10;

    // Everything but the stuck item's batch is done; that batch waits on its handler.
    await waitForProgress(harness.url, tenant, operationId, (p) => onlyStuckLeft(p) || finished(p));
    expect((await tenant.op(conversation, { action: 'pause', operation_id: operationId })).status).toBe(200);
    // The handler's signal fired (the stop message reached the worker): its batch gave the
    // items back. Nothing else would end that batch within the hour.
    const held = await waitForProgress(
      harness.url,
      tenant,
      operationId,
      (p) => (p.status === 'paused' && p.in_flight_count === 0) || finished(p),
    );
    expect(held).toMatchObject({ status: 'paused', in_flight_count: 0 });
    expect(held.remaining_count).toBeGreaterThan(0);

    expect((await tenant.op(conversation, { action: 'resume', operation_id: operationId })).status).toBe(200);
    await waitForProgress(harness.url, tenant, operationId, (p) => onlyStuckLeft(p) || finished(p));
    const cancelled = await tenant.op(conversation, { action: 'cancel', operation_id: operationId });
    expect(cancelled.status, JSON.stringify(cancelled.body)).toBe(200);
    const end = await waitForProgress(harness.url, tenant, operationId, finished);
    expect(end.status).toBe('cancelled');

    // Every item ends completed or abandoned (the stuck one among them), each recorded once.
    const result = await eventually(
      async () => {
        const audited = await audit(harness, operationId, items);
        return Object.keys(audited.byState).every((state) => ['completed', 'abandoned'].includes(state))
          ? audited
          : undefined;
      },
      { what: 'no item left pending or leased after the cancel' },
    );
    const abandoned = result.byState.abandoned ?? 0;
    expect(abandoned).toBeGreaterThanOrEqual(1);
    expect(result.byState).toEqual({ completed: items - abandoned, abandoned });
    expect(result.duplicates).toBe(0);
    expect(cancelled.body).toMatchObject({
      completed_count: items - abandoned,
      failed_count: 0,
      abandoned_count: abandoned,
    });
    const completedIds = await harness.db.query<{ item_id: string }>(
      `SELECT item_id FROM assistant_operation_item WHERE operation_id = $1 AND status = 'completed'`,
      [operationId],
    );
    const effects = await sideEffects(sidefx);
    expect(effects.has(stuck)).toBe(false);
    expect(completedIds.map((row) => effects.get(row.item_id))).toEqual(completedIds.map(() => 1));
  });
});
