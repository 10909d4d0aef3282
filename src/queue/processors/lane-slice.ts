/**
 * A batch job's slice of its lane (run-batch.ts): the fair-share slot the current batch holds,
 * and, before each batch's record, the decision whether this job takes the lane's next batch
 * itself — so the record's call can lease it too (opspad_record_lease_step) — or hands
 * the lane to a new job, or stops.
 *
 * The job's lock is confirmed with Redis (or the Postgres queue) only when half its duration has
 * passed since this run last extended it: the lock lives `jobLockMs` from its last extension, so
 * before that it is still held, and a run that stalled (a frozen process, a suspended machine)
 * longer than that sees the gap on its clocks and asks. A run that lost its job must not lease beside the run
 * another worker started under the same owner (the job id). Cost: one extension per slice in
 * practice (the first decision asks), where it was one per batch.
 */
import type { Job } from 'bullmq';
import type { FairShare, FairSlot } from '../fair-share.ts';

/** Whether a job takes its lane's next batch itself (`go`), hands it to a new job, or stops. */
export type NextBatch = 'go' | 'enqueue' | 'stop';

export interface LaneSlice {
  /** Takes the first batch's slot; false when the organization must wait its turn (park the job). */
  start(): Promise<boolean>;
  /** Decides, before a batch's record, who takes the lane's next batch (see above). */
  decideNext(): Promise<NextBatch>;
  /** Frees the slot held, if any (idempotent). */
  release(): void;
}

export function createLaneSlice(options: {
  job: Job;
  /** The job's lock token (none: a job not run by a worker, which has no lock). */
  token: string | undefined;
  jobLockMs: number;
  /** How long a confirmation of the lock is trusted (default: half of jobLockMs; tests set 0). */
  trustLockMs?: number;
  fair: FairShare | undefined;
  organizationId: string;
  /** When the slice ends (ms since the epoch). */
  endsAt: number;
  /** True when the worker is stopping: the lane's next batch goes to a new job. */
  stopping(): boolean;
}): LaneSlice {
  const { job, fair } = options;
  const owner = String(job.id);
  let slot: FairSlot | undefined;
  // When this run last extended the lock, on both clocks: the monotonic one (immune to clock
  // steps) and the wall clock (which also counts a suspended machine). Never yet: the first
  // decision asks.
  let seen: { monotonic: number; wall: number } | undefined;
  const trustLockMs = options.trustLockMs ?? options.jobLockMs / 2;

  const holdsJob = async (): Promise<boolean> => {
    const wall = Date.now();
    if (
      seen &&
      performance.now() - seen.monotonic < trustLockMs &&
      wall >= seen.wall &&
      wall - seen.wall < trustLockMs
    ) {
      return true;
    }
    // Taken before asking: the lock's new life starts when Redis applies the extension, at the
    // latest when the answer arrives, never before the question left.
    const asked = { monotonic: performance.now(), wall };
    // 1 when extended, 0 when the token no longer holds the lock (a number on either backend).
    const held = Number(await job.extendLock(options.token as string, options.jobLockMs)) >= 1;
    seen = held ? asked : undefined;
    return held;
  };

  const take = async (): Promise<boolean> => {
    slot = fair ? await fair.acquire(options.organizationId, owner) : undefined;
    return !fair || slot !== undefined;
  };

  const release = () => {
    slot?.release();
    slot = undefined;
  };

  return {
    start: take,
    async decideNext() {
      if (Date.now() >= options.endsAt || options.stopping()) {
        return 'enqueue';
      }
      release();
      if (!(await holdsJob())) {
        return 'stop';
      }
      // The next batch takes a slot of its own, as a new job would: another organization
      // waiting its turn gets it, and this lane goes back to the queue.
      return (await take()) ? 'go' : 'enqueue';
    },
    release,
  };
}
