/**
 * Postgres itself goes away: opspad's own cluster (test/helpers/postgres-cluster.ts) gets an
 * immediate shutdown — every backend killed, no checkpoint, what an OOM kill of the postmaster
 * looks like to clients — in the middle of a 100,000-id create and in the middle of batches,
 * then starts again, with the jobs in Redis and then in Postgres (where the queue itself goes). An API process and a worker process ride it out: they say in their log and
 * on `/readyz` that the database is gone, the create either fully exists or was refused with a
 * 503 and is retried, and the batches end with exact counts. Prints
 * `FAULT postgres_crash_restart items=… crashes=2 … recovery_seconds=…`.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, describe, expect, inject, it } from 'vitest';
import type { QueueBackendKind } from '../../src/config/env.ts';
import { createApiKey, createPostgresDatabase, type PostgresDatabase } from '../../src/store/index.ts';
import { closeCountingClient, sideEffects } from '../fixtures/counting-handler.ts';
import { harnessPrefix, ids, QUEUE_BACKENDS, queueEnv } from '../helpers/harness.ts';
import { type PostgresCluster, sparePort, startPostgresCluster } from '../helpers/postgres-cluster.ts';
import {
  COUNTING_HANDLER,
  killAllChildren,
  logMessage,
  type Spawned,
  spawnOpspad,
  startWorker,
  WORKER_SETTINGS,
} from '../helpers/processes.ts';
import { testKey } from '../helpers/redis.ts';
import { eventually } from '../helpers/wait.ts';

const RUN_TIMEOUT_MS = 180_000;
const CREATE_ITEMS = 100_000;
const BATCH_ITEMS = 6000;
const cleanups: (() => Promise<void>)[] = [];

afterEach(async () => {
  await killAllChildren();
  for (const cleanup of cleanups.splice(0).reverse()) {
    await cleanup().catch(() => undefined);
  }
});
afterAll(() => closeCountingClient());

interface Setup {
  cluster: PostgresCluster;
  db: PostgresDatabase;
  api: Spawned;
  worker: Spawned;
  baseUrl: string;
  apiKey: string;
}

async function setup(queue: QueueBackendKind): Promise<Setup> {
  const cluster = await startPostgresCluster('crash');
  cleanups.push(cluster.remove);
  // The test's own pool reads the ledger; it reconnects by itself after the restart.
  const db = createPostgresDatabase({ connectionString: cluster.url, poolSize: 2 });
  cleanups.push(() => db.close());
  const prefix = harnessPrefix();
  const env = {
    DATABASE_URL: cluster.url,
    ...(queue === 'redis' ? { REDIS_URL: inject('redisUrl') } : queueEnv('postgres')),
    SIDEFX_REDIS_URL: inject('redisUrl'),
    OPSPAD_QUEUE_PREFIX: prefix,
    OPSPAD_HANDLERS: COUNTING_HANDLER,
    ...WORKER_SETTINGS,
  };
  const port = await sparePort();
  const api = spawnOpspad('api', ['start'], {
    ...env,
    PORT: String(port),
    HOST: '127.0.0.1',
    OPSPAD_ADMIN_PASSWORD: 'test-admin-password',
  });
  await api.waitForLine((line) => logMessage(line) === 'opspad API listening', 'the API to listen');
  const worker = await startWorker('worker', prefix, env, queue);
  const { api_key: apiKey } = await createApiKey(db, `org-${randomUUID()}`);
  return { cluster, db, api, worker, baseUrl: `http://127.0.0.1:${port}`, apiKey };
}

async function callTool(s: Setup, conversation: string, body: unknown): Promise<{ status: number; body: never }> {
  const response = await fetch(`${s.baseUrl}/v1/conversations/${conversation}/tools/manage_assistant_operation`, {
    method: 'POST',
    headers: { authorization: `Bearer ${s.apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: response.status, body: (await response.json()) as never };
}

function createBody(items: number, sidefx: string) {
  return {
    action: 'create',
    operation_type: 'counting',
    total_items: items,
    item_ids: ids(items, 'item'),
    batch_size: 50,
    max_parallel_batches: 8,
    query_params: { sidefx_key: sidefx, latency_ms: 3 },
  };
}

async function readiness(s: Setup): Promise<{ status: number; body: { checks?: Record<string, string> } }> {
  const response = await fetch(`${s.baseUrl}/readyz`);
  return { status: response.status, body: (await response.json()) as { checks?: Record<string, string> } };
}

/** Items recorded so far, read from the ledger; 0 while the server is down. */
async function recorded(s: Setup, operationId: string): Promise<number> {
  const rows = await s.db
    .query<{ n: number }>('SELECT completed_count + failed_count AS n FROM assistant_operation WHERE id = $1', [
      operationId,
    ])
    .catch(() => []);
  return rows[0]?.n ?? 0;
}

/** The crash, and what every process must say about it while the server is down. */
async function crashAndSeeIt(s: Setup, since: { api: number; worker: number }): Promise<void> {
  s.cluster.crash();
  const down = await eventually(
    async () => {
      const ready = await readiness(s);
      return ready.status === 503 && ready.body.checks?.postgres !== 'ok' ? ready.body : undefined;
    },
    { timeoutMs: 30_000, what: '/readyz to say the database is gone' },
  );
  expect(down?.checks?.postgres).toMatch(/database is unreachable/);
  for (const [process, from] of [
    [s.api, since.api],
    [s.worker, since.worker],
  ] as const) {
    await process.waitForLine(
      (line) => logMessage(line) === 'database unreachable' && process.lines.indexOf(line) >= from,
      `${process.name} to log 'database unreachable'`,
    );
  }
}

describe('Postgres crash and restart', () => {
  it.each(QUEUE_BACKENDS)(
    'postgres_crash_restart (%s queue): a create and batches survive an immediate shutdown and a start',
    async (queue) => {
      const started = Date.now();
      const s = await setup(queue);
      const sidefx = testKey('sidefx');

      // 1. The crash lands while the 100,000-id create is being written (or just after it).
      const conversation = randomUUID();
      const creating = callTool(s, conversation, createBody(CREATE_ITEMS, testKey('sidefx-create')));
      await eventually(
        async () => {
          const rows = await s.db.query<{ n: number }>(
            `SELECT count(*)::int AS n FROM pg_stat_activity
           WHERE datname = current_database() AND state = 'active' AND query ~* 'assistant_operation_item'`,
          );
          return (rows[0]?.n ?? 0) > 0 ? true : undefined;
        },
        { timeoutMs: 60_000, intervalMs: 20, what: 'the create to write its items' },
      );
      await crashAndSeeIt(s, { api: s.api.lines.length, worker: s.worker.lines.length });
      const first = await creating;
      s.cluster.start();
      let outcome = 'created';
      if (first.status !== 200) {
        // Refused, clearly, and nothing half-made: the same create is then simply retried.
        expect(first.status, JSON.stringify(first.body)).toBe(503);
        expect(JSON.stringify(first.body)).toMatch(/database/i);
        outcome = 'refused_then_retried';
      }
      const createdId = await eventually(
        async () => {
          if (first.status === 200) {
            return (first.body as { operation_id: string }).operation_id;
          }
          const rows = await s.db
            .query<{ id: string }>('SELECT id FROM assistant_operation WHERE conversation_id = $1', [conversation])
            .catch(() => undefined);
          if (rows === undefined) {
            return undefined;
          }
          expect(rows).toEqual([]); // the refused create left no operation behind
          // A connection the client kept alive across the outage may be reset as it is reused
          // (the server closed it idle): a client retries that like the 503.
          const retried = await callTool(s, conversation, createBody(CREATE_ITEMS, testKey('sidefx-create'))).catch(
            (error: Error) => {
              if (error.message === 'fetch failed') {
                return undefined;
              }
              throw error;
            },
          );
          return retried?.status === 200 ? (retried.body as { operation_id: string }).operation_id : undefined;
        },
        { timeoutMs: 60_000, intervalMs: 250, what: 'the create to exist' },
      );
      const [items] = await s.db.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM assistant_operation_item WHERE operation_id = $1',
        [createdId],
      );
      expect(items?.n).toBe(CREATE_ITEMS);
      // Its 100,000 items are not the point here: cancelled, they leave the workers to the batches.
      const cancelled = await callTool(s, conversation, { action: 'cancel', operation_id: createdId });
      expect(cancelled.status, JSON.stringify(cancelled.body)).toBe(200);

      // 2. The crash lands in the middle of batches.
      const created = await callTool(s, randomUUID(), createBody(BATCH_ITEMS, sidefx));
      expect(created.status, JSON.stringify(created.body)).toBe(200);
      const operationId = (created.body as { operation_id: string }).operation_id;
      await eventually(async () => ((await recorded(s, operationId)) >= 1500 ? true : undefined), {
        timeoutMs: RUN_TIMEOUT_MS,
        what: '1500 items recorded',
      });
      await crashAndSeeIt(s, { api: s.api.lines.length, worker: s.worker.lines.length });
      s.cluster.start();
      const restarted = Date.now();
      // What the crash left recorded, read as soon as the server answers again.
      const before = await eventually(
        async () => {
          const n = await recorded(s, operationId);
          return n > 0 ? n : undefined;
        },
        { what: 'the server to answer' },
      );
      await eventually(async () => ((await recorded(s, operationId)) > (before ?? 0) ? true : undefined), {
        timeoutMs: 60_000,
        intervalMs: 50,
        what: 'the first record after the restart',
      });
      const recoverySeconds = (Date.now() - restarted) / 1000;
      for (const process of [s.api, s.worker]) {
        await process.waitForLine(
          (line) => logMessage(line) === 'database reachable again',
          `${process.name} to recover`,
        );
      }
      await eventually(
        async () => {
          const rows = await s.db
            .query<{ status: string }>('SELECT status FROM assistant_operation WHERE id = $1', [operationId])
            .catch(() => []);
          return rows[0]?.status === 'completed' ? true : undefined;
        },
        { timeoutMs: RUN_TIMEOUT_MS, intervalMs: 200, what: 'the operation to complete' },
      );
      expect((await readiness(s)).status).toBe(200);

      // The audit: every item in one final state, counters equal to rows, nothing recorded twice.
      const states = await s.db.query<{ status: string; n: number }>(
        'SELECT status, count(*)::int AS n FROM assistant_operation_item WHERE operation_id = $1 GROUP BY status',
        [operationId],
      );
      const [op] = await s.db.query<{ completed_count: number; failed_count: number }>(
        'SELECT completed_count, failed_count FROM assistant_operation WHERE id = $1',
        [operationId],
      );
      const [events] = await s.db.query<{ recorded: number }>(
        `SELECT coalesce(sum((data->>'completed')::int + (data->>'failed')::int), 0)::int AS recorded
       FROM operation_event WHERE operation_id = $1 AND kind = 'batch_recorded'`,
        [operationId],
      );
      expect(states).toEqual([{ status: 'completed', n: BATCH_ITEMS }]);
      expect(op).toEqual({ completed_count: BATCH_ITEMS, failed_count: 0 });
      const lost = BATCH_ITEMS - (states[0]?.n ?? 0);
      const duplicates = (events?.recorded ?? 0) - (states[0]?.n ?? 0);
      expect({ lost, duplicates }).toEqual({ lost: 0, duplicates: 0 });
      const effects = await sideEffects(sidefx);
      expect(effects.size).toBe(BATCH_ITEMS);
      const rehandled = [...effects.values()].filter((count) => count > 1).length;
      const seconds = ((Date.now() - started) / 1000).toFixed(1);
      process.stdout.write(
        `FAULT ${(queue === 'redis' ? 'postgres_crash_restart' : 'postgres_crash_pgqueue').padEnd(22)} items=${BATCH_ITEMS} crashes=2 create=${outcome} lost=${lost} duplicates=${duplicates} rehandled=${rehandled} recovery_seconds=${recoverySeconds.toFixed(1)} seconds=${seconds}\n`,
      );
    },
    300_000,
  );
});
