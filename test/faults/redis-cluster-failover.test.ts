/**
 * Fault injection on a Redis Cluster (three masters, a replica each; test/helpers/redis-cluster.ts):
 * the master holding opspad's hash-tagged keys is SIGKILLed mid-operation, its replica takes
 * over, and the API and two `opspad worker` processes carry on against the new master. Writes
 * the dead master had not replicated are lost with it; Postgres is the truth, so the reconciler
 * and the leases make up for them. Ends with the fault suite's audit (every item in one final
 * state, counters equal to the rows, nothing recorded twice) and prints
 * `FAULT redis_cluster_failover items=… failovers=1 lost=0 duplicates=0 …`.
 */
import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { closeCountingClient, countingHandler, sideEffects } from '../fixtures/counting-handler.ts';
import { copyRunDatabase } from '../helpers/file-database.ts';
import { type Harness, harnessPrefix, ids, startHarness } from '../helpers/harness.ts';
import { killAllChildren, startWorker } from '../helpers/processes.ts';
import { testKey } from '../helpers/redis.ts';
import { startRedisCluster } from '../helpers/redis-cluster.ts';
import { eventually } from '../helpers/wait.ts';

const RUN_TIMEOUT_MS = 180_000;
const cleanups: (() => Promise<void>)[] = [];

afterEach(async () => {
  await killAllChildren();
  for (const cleanup of cleanups.splice(0).reverse()) {
    await cleanup().catch(() => undefined);
  }
  closeCountingClient();
});

/** A database of the scenario's own, migrated, beside the file's; dropped afterwards. */
async function freshDatabase(): Promise<string> {
  const database = await copyRunDatabase('fault');
  cleanups.push(() => database.drop());
  return database.url;
}

async function recorded(harness: Harness, operationId: string): Promise<{ n: number; status: string }> {
  const rows = await harness.db
    .query<{ n: number; status: string }>(
      'SELECT completed_count + failed_count AS n, status FROM assistant_operation WHERE id = $1',
      [operationId],
    )
    .catch(() => []);
  return rows[0] ?? { n: 0, status: 'unknown' };
}

describe('fault injection on a Redis Cluster', () => {
  it('survives the master holding its keys being SIGKILLed mid-operation (replica failover, 6,000 items)', async () => {
    const started = Date.now();
    const cluster = await startRedisCluster({ replicasPerMaster: 1, nodeTimeoutMs: 1000 });
    cleanups.push(cluster.stop);
    const databaseUrl = await freshDatabase();
    const prefix = harnessPrefix();
    const clusterEnv = { REDIS_URL: '', REDIS_CLUSTER_NODES: cluster.nodes.join(',') };
    const harness = await startHarness('postgres', {
      databaseUrl,
      queue: 'redis',
      handlers: [countingHandler],
      env: { ...clusterEnv, OPSPAD_QUEUE_PREFIX: prefix },
    });
    cleanups.push(() => harness.close());
    const workerEnv = { ...clusterEnv, DATABASE_URL: databaseUrl, SIDEFX_REDIS_URL: inject('redisUrl') };
    await Promise.all([
      startWorker('worker-1', prefix, workerEnv, 'redis'),
      startWorker('worker-2', prefix, workerEnv, 'redis'),
    ]);
    const tenant = await harness.newTenant();
    const sidefx = testKey('sidefx');
    const items = 6000;
    const created = await tenant.op(randomUUID(), {
      action: 'create',
      operation_type: 'counting',
      total_items: items,
      item_ids: ids(items, 'item'),
      batch_size: 50,
      max_parallel_batches: 8,
      query_params: { sidefx_key: sidefx, latency_ms: 3 },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    const operationId = created.body.operation_id as string;

    await eventually(async () => ((await recorded(harness, operationId)).n >= 1500 ? true : undefined), {
      timeoutMs: RUN_TIMEOUT_MS,
      what: '1500 items recorded',
    });
    expect((await recorded(harness, operationId)).status).toBe('active'); // the kill lands mid-run
    const tag = `{${prefix}}`;
    const dead = await cluster.killMasterOf(tag);
    const promoted = await cluster.waitForMasterOf(tag, dead);
    expect(promoted).not.toBe(dead);

    await eventually(async () => ((await recorded(harness, operationId)).status === 'completed' ? true : undefined), {
      timeoutMs: RUN_TIMEOUT_MS,
      intervalMs: 200,
      what: 'the operation to complete after the failover',
    });
    const states = await harness.db.query<{ status: string; n: number }>(
      'SELECT status, count(*)::int AS n FROM assistant_operation_item WHERE operation_id = $1 GROUP BY status',
      [operationId],
    );
    const [op] = await harness.db.query<{ completed_count: number; failed_count: number }>(
      'SELECT completed_count, failed_count FROM assistant_operation WHERE id = $1',
      [operationId],
    );
    const [events] = await harness.db.query<{ recorded: number }>(
      `SELECT coalesce(sum((data->>'completed')::int + (data->>'failed')::int), 0)::int AS recorded
       FROM operation_event WHERE operation_id = $1 AND kind = 'batch_recorded'`,
      [operationId],
    );
    expect(states).toEqual([{ status: 'completed', n: items }]);
    expect(op).toEqual({ completed_count: items, failed_count: 0 });
    const lost = items - (states[0]?.n ?? 0);
    const duplicates = (events?.recorded ?? 0) - (states[0]?.n ?? 0);
    expect({ lost, duplicates }).toEqual({ lost: 0, duplicates: 0 });
    const effects = await sideEffects(sidefx);
    expect(effects.size).toBe(items);
    const rehandled = [...effects.values()].filter((count) => count > 1).length;
    const seconds = ((Date.now() - started) / 1000).toFixed(1);
    process.stdout.write(
      `FAULT ${'redis_cluster_failover'.padEnd(22)} items=${items} failovers=1 lost=${lost} duplicates=${duplicates} rehandled=${rehandled} seconds=${seconds}\n`,
    );
  }, 300_000);
});
