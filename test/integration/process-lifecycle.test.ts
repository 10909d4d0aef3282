/**
 * Real `opspad start` and `opspad worker` processes whose stdout reader stops after the first
 * line — staying alive without reading (a full pipe) or going away (EPIPE) — while a handler
 * logs megabytes: HTTP keeps answering, the operation completes with every item handled once,
 * the dropped lines are counted, and SIGTERM ends the process within its shutdown bound.
 * Then shutdown steps that never end — a handler ignoring its abort signal, a Redis that stopped
 * answering (a private redis-server, SIGSTOPped) — and the process still exits within the bound,
 * with code 3 and a line naming the step; a second signal exits at once.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { createApiKey, createPostgresDatabase, type OpspadDatabase } from '../../src/store/index.ts';
import { closeCountingClient, sideEffects } from '../fixtures/counting-handler.ts';
import { chattyHandler, stubbornHandler } from '../fixtures/lifecycle-handlers.ts';
import { type Harness, harnessPrefix, ids, startHarness } from '../helpers/harness.ts';
import { type PrivateDatabase, privatePostgresDatabase } from '../helpers/private-database.ts';
import { killAllChildren, logMessage, RUN_TIMEOUT_MS, startWorker, within } from '../helpers/processes.ts';
import { testKey } from '../helpers/redis.ts';
import {
  freePort,
  killReadOnceChildren,
  LIFECYCLE_HANDLERS,
  type StdoutReader,
  spawnReadOnce,
} from '../helpers/stdout-readers.ts';
import { eventually, finished, waitForProgress } from '../helpers/wait.ts';

/** The children's OPSPAD_SHUTDOWN_TIMEOUT. */
const BOUND_MS = 5000;
/** Generous: a loaded machine is slow to deliver a signal and reap a process, never 10 s slow. */
const MARGIN_MS = 10_000;
/** 1,000 items × 2 lines × ~1 KB: twice the sink's 1 MiB cap, and far more than a pipe holds. */
const CHATTY = { items: 1000, params: { log_lines: 2, log_bytes: 1000 } };

/** This file's own database: the children's reconcilers must not adopt other files' operations. */
let database: PrivateDatabase;
let db: OpspadDatabase;
const harnesses: Harness[] = [];
const cleanups: (() => Promise<void>)[] = [];

beforeAll(async () => {
  database = await privatePostgresDatabase('lifecycle');
  db = createPostgresDatabase({ connectionString: database.url, poolSize: 2 });
});
afterEach(async () => {
  await killReadOnceChildren();
  await killAllChildren();
  for (const cleanup of cleanups.splice(0).reverse()) {
    await cleanup().catch(() => undefined);
  }
  for (const harness of harnesses.splice(0)) {
    await harness.close().catch(() => undefined);
  }
});
afterAll(async () => {
  closeCountingClient();
  await db?.close();
  await database?.drop();
});

async function itemStates(operationId: string): Promise<Record<string, number>> {
  const rows = await db.query<{ status: string; n: number }>(
    'SELECT status, count(*)::int AS n FROM assistant_operation_item WHERE operation_id = $1 GROUP BY status',
    [operationId],
  );
  return Object.fromEntries(rows.map((row) => [row.status, row.n]));
}

/** Every item handled exactly once, and recorded completed. */
async function expectEveryItemOnce(operationId: string, sidefx: string, items: number): Promise<void> {
  const effects = await sideEffects(sidefx);
  expect(effects.size).toBe(items);
  expect([...effects.values()].every((count) => count === 1)).toBe(true);
  expect(await itemStates(operationId)).toEqual({ completed: items });
}

/** SIGTERMs `child` and waits for its exit, failing past the bound (+ margin). */
async function terminate(child: ChildProcess, exited: Promise<{ code: number | null }>, boundMs = BOUND_MS) {
  child.kill('SIGTERM');
  return within(exited, boundMs + MARGIN_MS, `the process to exit after SIGTERM (bound ${boundMs} ms)`);
}

const NOTICE: Record<StdoutReader, string> = {
  stalls: 'stdout is not being read',
  exits: 'stdout is closed (EPIPE)',
};

describe.each(['stalls', 'exits'] as const)('stdout reader that %s after the first line', (reader) => {
  it('opspad start keeps answering HTTP, completes the operation, and stops on SIGTERM', {
    timeout: 180_000,
  }, async () => {
    const port = await freePort();
    const prefix = harnessPrefix();
    const password = 'lifecycle-admin-password';
    const child = spawnReadOnce(
      'start',
      ['start'],
      {
        DATABASE_URL: database.url,
        REDIS_URL: inject('redisUrl'),
        OPSPAD_QUEUE_PREFIX: prefix,
        OPSPAD_HANDLERS: LIFECYCLE_HANDLERS,
        OPSPAD_ADMIN_PASSWORD: password,
        OPSPAD_SHUTDOWN_TIMEOUT: `${BOUND_MS}ms`,
        OPSPAD_LOG_LEVEL: 'info',
        HOST: '127.0.0.1',
        PORT: String(port),
      },
      reader,
    );
    await child.firstLine;
    const url = `http://127.0.0.1:${port}`;
    const healthz = async () => (await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(10_000) })).status;
    await eventually(async () => ((await healthz().catch(() => 0)) === 200 ? true : undefined), {
      what: 'opspad start to answer /healthz',
    });

    const { api_key: apiKey } = await createApiKey(db, `org-${randomUUID()}`);
    const sidefx = testKey('sidefx');
    const conversation = randomUUID();
    const tool = async (input: unknown) => {
      const response = await fetch(`${url}/v1/conversations/${conversation}/tools/manage_assistant_operation`, {
        method: 'POST',
        headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify(input),
        signal: AbortSignal.timeout(30_000),
      });
      return { status: response.status, body: (await response.json()) as Record<string, unknown> };
    };
    const created = await tool({
      action: 'create',
      operation_type: 'chatty',
      execution: 'background',
      total_items: CHATTY.items,
      item_ids: ids(CHATTY.items),
      batch_size: 50,
      max_parallel_batches: 4,
      query_params: { ...CHATTY.params, sidefx_key: sidefx },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    const operationId = created.body.operation_id as string;

    // Every poll asks /healthz first: it must answer while the handler floods the dead stdout.
    await eventually(
      async () => {
        expect(await healthz()).toBe(200);
        const got = await tool({ action: 'get', operation_id: operationId });
        return got.body.status === 'completed' ? true : undefined;
      },
      { timeoutMs: RUN_TIMEOUT_MS, intervalMs: 200, what: 'the chatty operation to complete' },
    );
    await expectEveryItemOnce(operationId, sidefx, CHATTY.items);

    const metrics = await fetch(`${url}/metrics`, {
      headers: { authorization: `Basic ${Buffer.from(`admin:${password}`).toString('base64')}` },
    });
    const dropped = Number(/^opspad_log_lines_dropped_total (\d+)$/m.exec(await metrics.text())?.[1]);
    expect(dropped).toBeGreaterThan(0);

    expect(await terminate(child.process, child.exited)).toEqual({ code: 0, signal: null });
    expect(child.stderr()).toContain(NOTICE[reader]);
    expect(child.stderr()).toMatch(/opspad: \d+ log lines were dropped while stdout was not being read/);
  });

  it('opspad worker completes the operation and stops on SIGTERM', { timeout: 180_000 }, async () => {
    const prefix = harnessPrefix();
    const harness = await startHarness('postgres', {
      databaseUrl: database.url,
      handlers: [chattyHandler],
      env: { OPSPAD_QUEUE_PREFIX: prefix },
    });
    harnesses.push(harness);
    const child = spawnReadOnce(
      'worker',
      ['worker'],
      {
        DATABASE_URL: database.url,
        REDIS_URL: inject('redisUrl'),
        OPSPAD_QUEUE_PREFIX: prefix,
        OPSPAD_HANDLERS: LIFECYCLE_HANDLERS,
        OPSPAD_SHUTDOWN_TIMEOUT: `${BOUND_MS}ms`,
        OPSPAD_LOG_LEVEL: 'info',
      },
      reader,
    );
    expect(logMessage(await child.firstLine)).toBe('workers started');

    const tenant = await harness.newTenant();
    const sidefx = testKey('sidefx');
    const created = await tenant.op(randomUUID(), {
      action: 'create',
      operation_type: 'chatty',
      total_items: CHATTY.items,
      item_ids: ids(CHATTY.items),
      batch_size: 50,
      max_parallel_batches: 4,
      query_params: { ...CHATTY.params, sidefx_key: sidefx },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    const operationId = created.body.operation_id as string;
    const end = await waitForProgress(harness.url, tenant, operationId, finished, RUN_TIMEOUT_MS);
    expect(end).toMatchObject({ status: 'completed', completed_count: CHATTY.items, in_flight_count: 0 });
    await expectEveryItemOnce(operationId, sidefx, CHATTY.items);

    expect(await terminate(child.process, child.exited)).toEqual({ code: 0, signal: null });
    expect(child.stderr()).toContain(NOTICE[reader]);
    expect(child.stderr()).toMatch(/opspad: \d+ log lines were dropped while stdout was not being read/);
  });
});

describe('a shutdown step that never ends', () => {
  /** A worker process running one stubborn item (its handler never returns). */
  async function stubbornWorker(boundMs: number) {
    const prefix = harnessPrefix();
    const harness = await startHarness('postgres', {
      databaseUrl: database.url,
      handlers: [stubbornHandler],
      env: { OPSPAD_QUEUE_PREFIX: prefix },
    });
    harnesses.push(harness);
    const worker = await startWorker('stubborn-worker', prefix, {
      DATABASE_URL: database.url,
      OPSPAD_HANDLERS: LIFECYCLE_HANDLERS,
      OPSPAD_SHUTDOWN_TIMEOUT: `${boundMs}ms`,
      // Past the bound: closing the workers waits for the handler for longer than shutdown may.
      OPSPAD_BATCH_GRACE: '10m',
    });
    const tenant = await harness.newTenant();
    const created = await tenant.op(randomUUID(), {
      action: 'create',
      operation_type: 'stubborn',
      total_items: 1,
      item_ids: ['stuck-1'],
    });
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    await worker.waitForLine((line) => logMessage(line) === 'stubborn item started', 'the stubborn item to start');
    return worker;
  }

  it('a handler ignoring its abort signal: exits with code 3 within the bound, naming "workers"', async () => {
    const bound = 3000;
    const worker = await stubbornWorker(bound);
    const exit = await terminate(worker.process, worker.exited, bound);
    expect(exit, worker.stderr()).toEqual({ code: 3, signal: null });
    expect(worker.stderr()).toContain(
      `opspad worker: shutdown gave up after ${bound} ms waiting for "workers" (exit code 3). Its connections close as the process exits; if "workers" needs longer, raise OPSPAD_SHUTDOWN_TIMEOUT.\n`,
    );
  });

  it('a second SIGTERM during shutdown exits at once with 143, naming the step it did not wait for', async () => {
    const worker = await stubbornWorker(600_000);
    worker.process.kill('SIGTERM');
    await worker.waitForLine((line) => logMessage(line)?.startsWith('shutting down') === true, 'shutdown to begin');
    const exit = await terminate(worker.process, worker.exited);
    expect(exit).toEqual({ code: 143, signal: null });
    expect(worker.stderr()).toContain('opspad worker: second SIGTERM: exiting now without waiting for "workers"');
  });

  it('a Redis that stops answering: exits with code 3 within the bound, naming a step that waits on Redis', async () => {
    const redis = await privateRedis();
    const bound = 3000;
    const worker = await startWorker('redis-stopped-worker', harnessPrefix(), {
      DATABASE_URL: database.url,
      REDIS_URL: redis.url,
      OPSPAD_SHUTDOWN_TIMEOUT: `${bound}ms`,
    });
    redis.process.kill('SIGSTOP');
    const exit = await terminate(worker.process, worker.exited, bound);
    expect(exit, `${worker.stderr()}\n${worker.lines.join('\n')}`).toEqual({ code: 3, signal: null });
    expect(worker.stderr()).toMatch(
      new RegExp(
        `opspad worker: shutdown gave up after ${bound} ms waiting for "(workers|reorganize worker|reconciler|queues)"`,
      ),
    );
  });
});

/** A redis-server of this test's own on a spare loopback port, killed afterwards. */
async function privateRedis(): Promise<{ url: string; process: ChildProcess }> {
  const port = await freePort();
  const server = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
    {
      stdio: 'ignore',
    },
  );
  cleanups.push(async () => {
    if (server.exitCode === null && server.signalCode === null) {
      const exited = new Promise((resolve) => server.once('exit', resolve));
      server.kill('SIGCONT');
      server.kill('SIGKILL');
      await exited;
    }
  });
  const probe = new Redis(port, '127.0.0.1', { lazyConnect: true, retryStrategy: () => 50, maxRetriesPerRequest: 0 });
  probe.on('error', () => {});
  try {
    await eventually(async () => ((await probe.ping().catch(() => undefined)) === 'PONG' ? true : undefined), {
      what: 'the private redis-server',
      timeoutMs: 10_000,
    });
  } finally {
    probe.disconnect();
  }
  return { url: `redis://127.0.0.1:${port}`, process: server };
}
