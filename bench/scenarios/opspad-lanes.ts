/**
 * The lanes opspad's throughput runs give an operation (its `max_parallel_batches`), by batch
 * size: its documented knob for the shape, as the peers get theirs (peers/settings.ts). The lanes
 * of one operation in one worker process that finish while its call is in flight go together in
 * the next call (src/store/leases/step-groups.ts): one commit and one turn on the operation row
 * for all of them, which small batches need. Batches of 1,000 go alone whatever the lanes, and
 * more of them only queue on the row.
 *
 * Chosen in runs in turns on the project's machine (two worker processes of 16 demo batches at
 * once; medians of three): at batch 100, 4 lanes 42k and 61k items/s, 16 lanes 66k and 72k; at
 * batch 10, 4 lanes 7.3k and 10.2k, 32 lanes 13.8k and 11.3k. With jobs in Postgres, 16 lanes at
 * batch 100 were within the noise of 4 (the queue's cost per job leads there).
 */
import { OPERATION_DEFAULTS } from '../../src/domain/operation-input.ts';

const LANES_BY_BATCH: Readonly<Record<number, number>> = { 10: 32, 100: 16 };

/**
 * The Postgres pool of each opspad process the throughput runs start (OPSPAD_PG_POOL_SIZE): the
 * systems of a run share the server’s connections (worker-processes.ts says why three).
 */
export const WORKER_PG_POOL_SIZE = 3;

/** The lanes of an operation of `batch` items a batch in the throughput runs. */
export function opspadLanes(batch: number): number {
  return LANES_BY_BATCH[batch] ?? OPERATION_DEFAULTS.maxParallelBatches;
}
