/**
 * Postgres fails over under load: a pg_auto_failover formation (test/helpers/pg-auto-failover.ts,
 * a monitor and two nodes, synchronous replication), opspad on the multi-host URL the monitor
 * hands out, two `opspad start` processes (API and workers each), the jobs in Redis and then in
 * Postgres (BullMQ's pool and LISTEN connection follow the primary too). Mid-run the primary node is
 * lost — its keeper and postmaster SIGKILLed together, as when its machine goes — the monitor
 * promotes the standby, and every process finds the new primary without a restart. A pause sent
 * during the switch still pauses. Ends with the fault suite's audit and prints
 * `FAULT postgres_failover items=… failovers=1 … failover_seconds=…`: from the loss to the first
 * batch recorded on the new primary, the engine's own detection included.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, describe, expect, inject, it } from 'vitest';
import { createApiKey, createPostgresDatabase, type PostgresDatabase } from '../../src/store/index.ts';
import { closeCountingClient, sideEffects } from '../fixtures/counting-handler.ts';
import { harnessPrefix, ids, QUEUE_BACKENDS, queueEnv } from '../helpers/harness.ts';
import { startFormation } from '../helpers/pg-auto-failover.ts';
import { sparePort } from '../helpers/postgres-cluster.ts';
import { COUNTING_HANDLER, killAllChildren, logMessage, spawnOpspad, WORKER_SETTINGS } from '../helpers/processes.ts';
import { testKey } from '../helpers/redis.ts';
import { eventually } from '../helpers/wait.ts';

const RUN_TIMEOUT_MS = 240_000;
const ITEMS = 20_000;
const PAUSED_ITEMS = 2000;
const cleanups: (() => Promise<void>)[] = [];

afterEach(async () => {
  await killAllChildren();
  for (const cleanup of cleanups.splice(0).reverse()) {
    await cleanup().catch(() => undefined);
  }
});
afterAll(() => closeCountingClient());

interface Api {
  url: string;
  apiKey: string;
}

async function call(api: Api, conversation: string, body: unknown): Promise<{ status: number; body: never }> {
  const response = await fetch(`${api.url}/v1/conversations/${conversation}/tools/manage_assistant_operation`, {
    method: 'POST',
    headers: { authorization: `Bearer ${api.apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: response.status, body: (await response.json()) as never };
}

async function statusOf(db: PostgresDatabase, operationId: string) {
  const rows = await db
    .query<{ status: string; n: number }>(
      'SELECT status, completed_count + failed_count AS n FROM assistant_operation WHERE id = $1',
      [operationId],
    )
    .catch(() => []);
  return rows[0] ?? { status: 'unknown', n: 0 };
}

/** Every item in one final state, counters equal to rows, nothing recorded twice. */
async function audit(db: PostgresDatabase, operationId: string, items: number, sidefx: string) {
  const states = await db.query<{ status: string; n: number }>(
    'SELECT status, count(*)::int AS n FROM assistant_operation_item WHERE operation_id = $1 GROUP BY status',
    [operationId],
  );
  const [op] = await db.query<{ completed_count: number; failed_count: number }>(
    'SELECT completed_count, failed_count FROM assistant_operation WHERE id = $1',
    [operationId],
  );
  const [events] = await db.query<{ recorded: number }>(
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
  return { lost, duplicates, rehandled: [...effects.values()].filter((count) => count > 1).length };
}

describe('Postgres failover', () => {
  it.each(QUEUE_BACKENDS)(
    'postgres_failover (%s queue): the primary is lost mid-run, the standby is promoted, every count is exact',
    async (queue) => {
      const started = Date.now();
      const formation = await startFormation();
      cleanups.push(formation.remove);
      const db = createPostgresDatabase({ connectionString: formation.url, poolSize: 2 });
      cleanups.push(() => db.close());
      const prefix = harnessPrefix();
      const env = {
        DATABASE_URL: formation.url,
        ...(queue === 'redis' ? { REDIS_URL: inject('redisUrl') } : queueEnv('postgres')),
        SIDEFX_REDIS_URL: inject('redisUrl'),
        OPSPAD_QUEUE_PREFIX: prefix,
        OPSPAD_HANDLERS: COUNTING_HANDLER,
        OPSPAD_ADMIN_PASSWORD: 'test-admin-password',
        HOST: '127.0.0.1',
        ...WORKER_SETTINGS,
      };
      const { api_key: apiKey } = await createApiKey(db, `org-${randomUUID()}`);
      const apis: Api[] = [];
      for (const name of ['api-1', 'api-2']) {
        const port = await sparePort();
        const process = spawnOpspad(name, ['start'], { ...env, PORT: String(port) });
        await process.waitForLine((line) => logMessage(line) === 'opspad API listening', `${name} to listen`);
        apis.push({ url: `http://127.0.0.1:${port}`, apiKey });
      }
      const [first, second] = apis as [Api, Api];
      const sidefx = testKey('sidefx');
      const pausedSidefx = testKey('sidefx-paused');
      const create = async (api: Api, items: number, key: string, latencyMs: number) => {
        const conversation = randomUUID();
        const created = await call(api, conversation, {
          action: 'create',
          operation_type: 'counting',
          total_items: items,
          item_ids: ids(items, 'item'),
          batch_size: 50,
          max_parallel_batches: 8,
          query_params: { sidefx_key: key, latency_ms: latencyMs },
        });
        expect(created.status, JSON.stringify(created.body)).toBe(200);
        return { id: (created.body as { operation_id: string }).operation_id, conversation };
      };
      const { id: operationId } = await create(first, ITEMS, sidefx, 2);
      const { id: pausedId, conversation: pausedConversation } = await create(second, PAUSED_ITEMS, pausedSidefx, 20);

      await eventually(async () => ((await statusOf(db, operationId)).n >= 3000 ? true : undefined), {
        timeoutMs: RUN_TIMEOUT_MS,
        intervalMs: 200,
        what: '3000 items recorded',
      });
      const old = await formation.primary();
      expect(old).toBeDefined();
      const lostAt = new Date();
      formation.lose(old as string);
      // The engine's part: until the standby takes writes.
      const promotedAt = await eventually(
        async () => {
          const now = await formation.primary();
          return now !== undefined && now !== old ? Date.now() : undefined;
        },
        { timeoutMs: 90_000, intervalMs: 100, what: 'the standby to be promoted' },
      );
      const promotionSeconds = (promotedAt - lostAt.getTime()) / 1000;

      // A pause sent during the switch: refused with a 503 until the new primary answers, then done.
      const pause = await eventually(
        async () => {
          const answer = await call(second, pausedConversation, { action: 'pause', operation_id: pausedId }).catch(
            () => null,
          );
          return answer && answer.status !== 503 ? answer : undefined;
        },
        { timeoutMs: 90_000, intervalMs: 250, what: 'the pause to be taken' },
      );
      expect(pause.status, JSON.stringify(pause.body)).toBe(200);
      const promoted = await formation.primary();
      expect(promoted).toBeDefined();
      expect(promoted).not.toBe(old);

      // The first batch recorded on the new primary: its transaction began after the loss.
      const firstRecord = await eventually(
        async () => {
          const rows = await db
            .query<{ at: Date }>(
              `SELECT min(created_at) AS at FROM operation_event
             WHERE operation_id = $1 AND kind = 'batch_recorded' AND created_at > $2`,
              [operationId, lostAt],
            )
            .catch(() => []);
          return rows[0]?.at ?? undefined;
        },
        { timeoutMs: 90_000, intervalMs: 200, what: 'the first batch recorded on the new primary' },
      );
      const failoverSeconds = (firstRecord.getTime() - lostAt.getTime()) / 1000;

      await eventually(async () => ((await statusOf(db, operationId)).status === 'completed' ? true : undefined), {
        timeoutMs: RUN_TIMEOUT_MS,
        intervalMs: 500,
        what: 'the operation to complete after the failover',
      });
      // The paused operation stayed paused; resumed, it completes too.
      const paused = await statusOf(db, pausedId);
      expect(paused.status).toBe('paused');
      const resumed = await call(second, pausedConversation, { action: 'resume', operation_id: pausedId });
      expect(resumed.status, JSON.stringify(resumed.body)).toBe(200);
      await eventually(async () => ((await statusOf(db, pausedId)).status === 'completed' ? true : undefined), {
        timeoutMs: RUN_TIMEOUT_MS,
        intervalMs: 500,
        what: 'the paused operation to complete once resumed',
      });
      const result = await audit(db, operationId, ITEMS, sidefx);
      const pausedResult = await audit(db, pausedId, PAUSED_ITEMS, pausedSidefx);
      const seconds = ((Date.now() - started) / 1000).toFixed(1);
      process.stdout.write(
        `FAULT ${(queue === 'redis' ? 'postgres_failover' : 'postgres_failover_pgqueue').padEnd(22)} items=${ITEMS + PAUSED_ITEMS} failovers=1 paused_during_switch=1 lost=${result.lost + pausedResult.lost} duplicates=${result.duplicates + pausedResult.duplicates} rehandled=${result.rehandled + pausedResult.rehandled} failover_seconds=${failoverSeconds.toFixed(1)} promotion_seconds=${promotionSeconds.toFixed(1)} seconds=${seconds}\n`,
      );
    },
    600_000,
  );
});
