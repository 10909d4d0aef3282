/**
 * The Postgres job queues a user would pick instead of opspad, doing the same work: pg-boss and
 * graphile-worker, two worker processes each (as `opspad_background_*` runs two `opspad worker`
 * processes), on the run's Postgres, each in its own schema (installed here, dropped at the end).
 * A run inserts its items (pending) and its jobs before the clock starts, as opspad's figure
 * creates its operation first; the clock runs from the moment the workers are told to work the
 * run's queue until every item is recorded (each handler runs items.ts's one statement, then
 * reports how many ids it recorded; the last report is confirmed against the table).
 *
 * `batch` is how many ids a job carries; batch 1 is one job per item. Each system runs in the
 * best of its documented settings for the shape (PGBOSS_SETTINGS, GRAPHILE_SETTINGS; the notes
 * of the table say which).
 */
import { fileURLToPath } from 'node:url';
import { makeWorkerUtils, runMigrations, type WorkerUtils } from 'graphile-worker';
import pg from 'pg';
import { PgBoss } from 'pg-boss';
import { type BenchContext, waitFor } from '../../lib/common.ts';
import { type Forked, forkChild } from '../../lib/forked.ts';
import { createItemsTableSql, insertRunItems, runItemIds, unrecordedCount } from './items.ts';
import { GRAPHILE_SETTINGS, type PeerName, type PeerRunner, PGBOSS_SETTINGS } from './settings.ts';

const PEER_PROCESSES = 2;
const ADD_CHUNK = 1_000;

/** The jobs of a run: `batch` ids each. */
function jobsOf(ids: readonly string[], batch: number): string[][] {
  const jobs: string[][] = [];
  for (let start = 0; start < ids.length; start += batch) {
    jobs.push(ids.slice(start, start + batch));
  }
  return jobs;
}

interface PeerDriver {
  /** Queues the run's jobs (not timed); returns the queue or task name. */
  enqueue(run: number, batch: number, jobs: string[][]): Promise<string>;
  /** Tells the workers to work `name` (the clock is running). */
  go(name: string, batch: number): Promise<void>;
  /** After the run: stop working `name`, wait for its jobs to be finished, and remove them. */
  finish(name: string): Promise<void>;
  close(): Promise<void>;
}

async function pgbossDriver(ctx: BenchContext, schema: string, children: Forked[]): Promise<PeerDriver> {
  const boss = new PgBoss({ connectionString: ctx.databaseUrl, schema, schedule: false });
  boss.on('error', (error: Error) => ctx.log(`pg-boss: ${error.message}`));
  await boss.start();
  const pool = new pg.Pool({ connectionString: ctx.databaseUrl, max: 2 });
  pool.on('error', () => {});
  return {
    async enqueue(run, batch, jobs) {
      const queue = `bench_b${batch}_r${run}`;
      await boss.createQueue(queue);
      for (let start = 0; start < jobs.length; start += ADD_CHUNK) {
        await boss.insert(
          queue,
          jobs.slice(start, start + ADD_CHUNK).map((ids) => ({ data: { ids } })),
        );
      }
      return queue;
    },
    async go(queue, batch) {
      await Promise.all(children.map((child) => child.call('work', { queue, ...PGBOSS_SETTINGS[batch] })));
    },
    async finish(queue) {
      await Promise.all(children.map((child) => child.call('halt', { queue })));
      await waitFor(`pg-boss queue ${queue} to finish its jobs`, async () => {
        const { rows } = await pool.query(
          `SELECT 1 FROM ${schema}.job WHERE name = $1 AND state < 'completed' LIMIT 1`,
          [queue],
        );
        return rows.length === 0 ? true : undefined;
      });
      await boss.deleteQueue(queue);
    },
    async close() {
      await boss.stop({ graceful: false, close: true, timeout: 5_000 });
      await pool.end();
    },
  };
}

async function graphileDriver(ctx: BenchContext, schema: string, children: Forked[]): Promise<PeerDriver> {
  const utils: WorkerUtils = await makeWorkerUtils({ connectionString: ctx.databaseUrl, schema });
  const pool = new pg.Pool({ connectionString: ctx.databaseUrl, max: 2 });
  pool.on('error', () => {});
  let started: string | undefined;
  return {
    async enqueue(run, batch, jobs) {
      // A pool per setting, started before its jobs are queued (not timed).
      const settings = JSON.stringify(GRAPHILE_SETTINGS[batch]);
      if (started !== settings) {
        await Promise.all(children.map((child) => child.call('start', JSON.parse(settings))));
        started = settings;
      }
      const task = `bench_b${batch}_r${run}`;
      for (let start = 0; start < jobs.length; start += ADD_CHUNK) {
        await utils.addJobs(
          jobs.slice(start, start + ADD_CHUNK).map((ids) => ({ identifier: task, payload: { ids } })),
        );
      }
      return task;
    },
    async go(task) {
      await Promise.all(children.map((child) => child.call('go', { task })));
      // Wakes both pools now, instead of at their next poll (graphile-worker's own channel).
      await pool.query(`SELECT pg_notify('jobs:insert', '{"count":1000}')`);
    },
    async finish(task) {
      await Promise.all(children.map((child) => child.call('halt', { task })));
      // A finished job is deleted (its completion may be batched for completeJobBatchDelay ms).
      await waitFor(`graphile-worker task ${task} to finish its jobs`, async () => {
        const { rows } = await pool.query(
          `SELECT 1 FROM ${schema}._private_jobs j JOIN ${schema}._private_tasks t ON t.id = j.task_id
           WHERE t.identifier = $1 LIMIT 1`,
          [task],
        );
        return rows.length === 0 ? true : undefined;
      });
    },
    async close() {
      await utils.release();
      await pool.end();
    },
  };
}

/** A peer installed in a schema of its own, with its two worker processes. */
export async function peerRunner(ctx: BenchContext, peer: PeerName): Promise<PeerRunner> {
  const schema = `bench_${peer}`;
  const admin = new pg.Pool({ connectionString: ctx.databaseUrl, max: 2 });
  admin.on('error', () => {});
  await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  let closed = false;
  const dropSchema = async () => {
    await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).catch(() => {});
    await admin.end().catch(() => {});
  };
  if (peer === 'pgboss') {
    // pg-boss creates its schema and tables when it starts (migrate: true in the driver's instance).
    const installer = new PgBoss({ connectionString: ctx.databaseUrl, schema, schedule: false, supervise: false });
    await installer.start();
    await installer.stop({ graceful: false, close: true });
  } else {
    await runMigrations({ connectionString: ctx.databaseUrl, schema });
  }
  await admin.query(createItemsTableSql(schema));
  const script = fileURLToPath(new URL(`./${peer}-child.ts`, import.meta.url));
  const children = await Promise.all(
    Array.from({ length: PEER_PROCESSES }, () =>
      forkChild(ctx, script, { DATABASE_URL: ctx.databaseUrl, PEER_SCHEMA: schema }),
    ),
  );
  const driver = await (peer === 'pgboss' ? pgbossDriver : graphileDriver)(ctx, schema, children);
  const close = async () => {
    if (closed) {
      return;
    }
    closed = true;
    await Promise.all(children.map((child) => child.stop()));
    await driver.close();
    await dropSchema();
  };
  ctx.defer(close);

  let recorded = 0;
  let reached: (() => void) | undefined;
  let failed: ((error: Error) => void) | undefined;
  let target = Number.POSITIVE_INFINITY;
  for (const child of children) {
    child.onEvent((event) => {
      if (typeof event.failed === 'string') {
        failed?.(new Error(`${peer}: a job failed: ${event.failed}`));
      }
      recorded += Number(event.recorded ?? 0);
      if (recorded >= target) {
        reached?.();
      }
    });
    child.exited.then((code) => failed?.(new Error(`${peer}: a worker process exited (${code})`)));
  }
  let runs = 0;
  return {
    async run(batch, items) {
      const run = runs++;
      const ids = runItemIds(run, items);
      await insertRunItems(admin, schema, ids);
      const name = await driver.enqueue(run, batch, jobsOf(ids, batch));
      recorded = 0;
      target = items;
      const allReported = new Promise<void>((resolve, reject) => {
        reached = resolve;
        failed = reject;
      });
      const bound = setTimeout(
        () => failed?.(new Error(`${peer}: ${recorded} of ${items} items after ${ctx.plan.waitLimitMs} ms`)),
        ctx.plan.waitLimitMs,
      );
      const label = `${peer}_${batch === 1 ? 'job_per_item' : `array_b${batch}`}`;
      await ctx.probe?.before(label);
      const started = performance.now();
      try {
        await driver.go(name, batch);
        await allReported;
      } finally {
        clearTimeout(bound);
        failed = undefined;
      }
      let ended = performance.now();
      // The reports follow each statement's commit (pg-boss's transactional setting: its handler
      // returns just before the commit): confirmed against the table, the clock stopped again if
      // it had to wait.
      if ((await unrecordedCount(admin, schema, run)) > 0) {
        await waitFor(`${peer} to record run ${run}`, async () =>
          (await unrecordedCount(admin, schema, run)) === 0 ? true : undefined,
        );
        ended = performance.now();
      }
      target = Number.POSITIVE_INFINITY;
      await ctx.probe?.after(label, items);
      await driver.finish(name);
      if (recorded < items) {
        throw new Error(`${peer} recorded ${recorded} of ${items} items`);
      }
      return (items / (ended - started)) * 1000;
    },
    close,
  };
}
