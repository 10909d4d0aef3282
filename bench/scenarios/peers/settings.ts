/**
 * The peers' settings by shape, and what the driver module (peers.ts) exports: everything the
 * benchmark's table needs without loading pg-boss or graphile-worker, which live in this folder's
 * own package (they ask for Node 22; the project promises Node 20.19).
 */
import type { BenchContext } from '../../lib/common.ts';

export type PeerName = 'pgboss' | 'graphile';

export interface PgBossSettings {
  /** Jobs one fetch claims, handed to one handler call (work's `batchSize`). */
  batchSize: number;
  /** Fetch-and-handle loops per process (`localConcurrency`). */
  localConcurrency: number;
  /** The handler's statement and the jobs' completion in one transaction. */
  transactional: boolean;
}

export interface GraphileSettings {
  /** Jobs one process runs at once (`concurrency`). */
  concurrency: number;
  /** Jobs one fetch locks for the pool's workers (`localQueue.size`; 1: off). */
  localQueueSize: number;
  /** Completions batched for this long, in ms (`completeJobBatchDelay`; -1: off). */
  completeJobBatchDelay: number;
}

/**
 * Each system's setting by batch (1: a job per item), the best of its documented knobs in runs
 * in turns on the project's machine. pg-boss: a fetch claims `batchSize` jobs and hands them to
 * one handler call, which records all their ids with one statement; `burstWhenBatchFull` fetches
 * again at once while fetches come back full (a fetch of one job would wait out the polling
 * interval, 0.5 s at least, after each job); `transactional` was slower every time.
 * graphile-worker: its performance page's batching (`localQueue`, `completeJobBatchDelay` 0)
 * and concurrency; its task gets one job.
 */
export const PGBOSS_SETTINGS: Record<number, PgBossSettings> = {
  1: { batchSize: 1000, localConcurrency: 2, transactional: false },
  10: { batchSize: 100, localConcurrency: 4, transactional: false },
  100: { batchSize: 10, localConcurrency: 4, transactional: false },
  1000: { batchSize: 10, localConcurrency: 4, transactional: false },
};

export const GRAPHILE_SETTINGS: Record<number, GraphileSettings> = {
  1: { concurrency: 24, localQueueSize: 500, completeJobBatchDelay: 0 },
  10: { concurrency: 24, localQueueSize: 500, completeJobBatchDelay: 0 },
  100: { concurrency: 8, localQueueSize: 50, completeJobBatchDelay: 0 },
  1000: { concurrency: 4, localQueueSize: 8, completeJobBatchDelay: 0 },
};

export function describeSettings(peer: PeerName, batch: number): string {
  if (peer === 'pgboss') {
    const s = PGBOSS_SETTINGS[batch] as PgBossSettings;
    return `work batchSize ${s.batchSize} (${s.batchSize * batch} ids a handler call, one statement), localConcurrency ${s.localConcurrency}, burstWhenBatchFull${s.transactional ? ', transactional' : ''}`;
  }
  const s = GRAPHILE_SETTINGS[batch] as GraphileSettings;
  return `concurrency ${s.concurrency}, localQueue ${s.localQueueSize > 1 ? s.localQueueSize : 'off'}, completeJobBatchDelay ${s.completeJobBatchDelay}`;
}

export interface PeerRunner {
  /** One run of `items` ids in jobs of `batch` ids (1: a job per item) → items/s. */
  run(batch: number, items: number): Promise<number>;
  close(): Promise<void>;
}

/** What peers.ts exports to the benchmark (loaded by load.ts). */
export interface PeersModule {
  peerRunner(ctx: BenchContext, peer: PeerName): Promise<PeerRunner>;
}
