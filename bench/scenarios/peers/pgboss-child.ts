/**
 * A pg-boss worker process of the peers scenario (peers.ts). It connects at start (pg-boss in the
 * schema PEER_SCHEMA, installed by the parent; no maintenance or cron here: the parent's instance
 * supervises), and works a queue when told: each fetch of jobs is handed to one handler call,
 * which records every id the jobs carry with one statement (items.ts) and reports the count.
 */

import pg from 'pg';
import { type Job, PgBoss } from 'pg-boss';
import { recordedCounter, reportFailure, serve } from '../../lib/forked-child.ts';
import { recordItemsSql } from './items.ts';

const connectionString = process.env.DATABASE_URL as string;
const schema = process.env.PEER_SCHEMA as string;
const record = recordItemsSql(schema);
const recorded = recordedCounter();

// Pools sized for localConcurrency ≤ 4 (PGBOSS_SETTINGS): both peers' processes and the bench
// stay within the server's default of 100 connections, which a full pool would exhaust.
const boss = new PgBoss({ connectionString, schema, supervise: false, schedule: false, migrate: false, max: 6 });
boss.on('error', (error: Error) => process.stderr.write(`pg-boss worker: ${error.message}\n`));
await boss.start();
const pool = new pg.Pool({ connectionString, max: 6, application_name: 'bench-pgboss' });
pool.on('error', () => {}); // an idle client's lost connection must not end the worker

interface WorkArgs {
  queue: string;
  batchSize: number;
  localConcurrency: number;
  transactional: boolean;
}

type Data = { ids: string[] };

/** A failed statement fails the run at once (pg-boss would retry the jobs later). */
function failed(error: unknown): never {
  reportFailure(error);
  throw error;
}

serve(
  {
    async work(args) {
      const { queue, batchSize, localConcurrency, transactional } = args as unknown as WorkArgs;
      const options = {
        batchSize,
        localConcurrency,
        // Fetch again at once while fetches come back full (the documented setting for a backlog).
        burstWhenBatchFull: batchSize > 1,
        pollingIntervalSeconds: 0.5,
      };
      if (transactional) {
        await boss.work(queue, { ...options, transactional: true as const }, async (jobs: Job<Data>[], tx) => {
          const ids = jobs.flatMap((job) => job.data.ids);
          await tx.executeSql(record, [ids]).catch(failed);
          recorded.add(ids.length);
        });
      } else {
        await boss.work(queue, options, async (jobs: Job<Data>[]) => {
          const ids = jobs.flatMap((job) => job.data.ids);
          await pool.query(record, [ids]).catch(failed);
          recorded.add(ids.length);
        });
      }
    },
    async halt(args) {
      await boss.offWork(String(args.queue), { wait: true });
    },
  },
  async () => {
    await boss.stop({ graceful: true, close: true, timeout: 10_000 });
    await pool.end();
  },
);
