/**
 * opspad's settings in the throughput runs, as the peers have theirs (peers/settings.ts).
 *
 * Lanes: an operation's `max_parallel_batches`, by batch size, its documented knob for the
 * shape. The lanes of one operation in one worker process that finish while its call is in
 * flight go together in the next call (src/store/leases/step-groups.ts): one commit and one turn
 * on the operation row for all of them, which small batches need. Batches of 1,000 go alone
 * whatever the lanes, and more of them only queue on the row. Chosen in runs in turns on the
 * project's machine (two worker processes of 16 demo batches at once; medians of three): at batch
 * 100, 4 lanes 42k and 61k items/s, 16 lanes 66k and 72k; at batch 10, 4 lanes 7.3k and 10.2k,
 * 32 lanes 13.8k and 11.3k. With jobs in Postgres, 16 lanes at batch 100 were within the noise
 * of 4 (the queue's cost per job leads there).
 *
 * Connections: a run's systems share one server's (max_connections, 100 by default), and a pool
 * keeps its idle ones for 10 s, so more lanes, whose first leases go out together, filled each
 * process's default pool of ten and a peer was refused. Lanes that go together need few: in runs
 * in turns, pools of three and five, and of five and ten, gave the same items a second at batch
 * 10 and 100, and three and ten at batch 1,000 (225–239k against 193–220k).
 */
import { OPERATION_DEFAULTS } from '../../src/domain/operation-input.ts';

const LANES_BY_BATCH: Readonly<Record<number, number>> = { 10: 32, 100: 16 };

/** The lanes of an operation of `batch` items a batch in the throughput runs. */
export function opspadLanes(batch: number): number {
  return LANES_BY_BATCH[batch] ?? OPERATION_DEFAULTS.maxParallelBatches;
}

/**
 * OPSPAD_PG_POOL_SIZE of each opspad process that runs batches (worker processes, the in-process
 * workers): their database pool, and the queue's own with jobs in Postgres.
 */
export const RUNNER_PG_POOL_SIZE = 3;

/**
 * OPSPAD_PG_POOL_SIZE of the benchmark's own queue handle, which only adds each operation's lanes:
 * the Postgres queue's pool, with jobs in Postgres (the benchmark's database handle is its own).
 */
export const DISPATCHER_PG_POOL_SIZE = 2;
