/**
 * A graphile-worker process of the peers scenario (peers.ts). `start` runs a worker pool with the
 * shape's settings (graphile-worker in the schema PEER_SCHEMA, installed by the parent); `go`
 * adds the run's task to the pool's task list (read again before each fetch), after which the
 * parent's NOTIFY on `jobs:insert` wakes the pool. The task records every id its job carries with
 * one statement (items.ts), through the job's own pool, and reports the count.
 */
import { Logger, type Runner, run, type Task } from 'graphile-worker';
import { recordedCounter, reportFailure, serve } from '../../lib/forked-child.ts';
import { recordItemsSql } from './items.ts';

const connectionString = process.env.DATABASE_URL as string;
const schema = process.env.PEER_SCHEMA as string;
const record = recordItemsSql(schema);
const recorded = recordedCounter();

const logger = new Logger(() => (level, message) => {
  if (level === 'error' || level === 'warning') {
    process.stderr.write(`graphile-worker: ${message}\n`);
  }
});

const recordJob: Task = async (payload, helpers) => {
  const { ids } = payload as { ids: string[] };
  try {
    await helpers.query(record, [ids]);
  } catch (error) {
    reportFailure(error);
    throw error;
  }
  recorded.add(ids.length);
};

/** Read by the pool before each fetch: a task added here is worked from the next fetch on. */
const tasks: Record<string, Task> = { bench_idle: async () => {} };
let runner: Runner | undefined;

interface StartArgs {
  concurrency: number;
  localQueueSize: number;
  completeJobBatchDelay: number;
}

serve(
  {
    async start(args) {
      const { concurrency, localQueueSize, completeJobBatchDelay } = args as unknown as StartArgs;
      await runner?.stop();
      runner = await run({
        connectionString,
        schema,
        concurrency,
        // A connection a running job, capped so both peers' processes and the bench stay within
        // the server's default of 100 connections (jobs past the cap wait for a connection).
        maxPoolSize: Math.min(concurrency + 2, 18),
        noHandleSignals: true,
        logger,
        taskList: tasks,
        preset: {
          worker: {
            ...(localQueueSize > 1 ? { localQueue: { size: localQueueSize } } : {}),
            completeJobBatchDelay,
          },
        },
      });
    },
    go(args) {
      tasks[String(args.task)] = recordJob;
    },
    halt(args) {
      delete tasks[String(args.task)];
    },
  },
  async () => {
    await runner?.stop();
  },
);
