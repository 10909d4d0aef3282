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
import type { KeyLimiter, KeyPermit, KeyRefusal } from '../key-limiter.ts';

/**
 * How long a job goes on with its lane's next batches before it hands the lane to a new job,
 * unless OPSPAD_LANE_SLICE says otherwise. Bounded so a job's span, its log and a worker's share
 * of the lanes stay readable and move between processes; fairness is per batch whatever the slice
 * (each batch takes its own slot).
 */
export const LANE_SLICE_MS = 1000;

/** Whether a job takes its lane's next batch itself (`go`), hands it to a new job, or stops. */
export type NextBatch = 'go' | 'enqueue' | 'stop';

/** Why a batch may not start: its organization waits its turn, or its key is at its limit. */
export type Refusal = { by: 'fair_share' } | { by: 'key_limit'; refusal: KeyRefusal };

export interface LaneSlice {
  /** Takes the first batch's slot (and its key's items); a refusal means: park the job. */
  start(): Promise<Refusal | undefined>;
  /**
   * Items the current batch may lease under its key's limits (undefined: no limits). Its lease
   * then tells {@link LaneSlice.leased} how many it took.
   */
  granted(): number | undefined;
  /** The current batch leased `count` items of its grant: the rest goes back to the key. */
  leased(count: number): Promise<void>;
  /**
   * Before a batch the job leases itself after a grant went back unused (the record's call
   * leased nothing): asks the key again, keeping the slot. False: the key is at its limit (the
   * slot is freed; hand the lane to a new job, which parks).
   */
  regrant(): Promise<boolean>;
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
  /** The handler's provider limits: each batch asks its key for `want` items. */
  keys?: { limiter: KeyLimiter; key: string; operationId: string; want: number };
  /** When the slice ends (ms since the epoch). */
  endsAt: number;
  /** True when the worker is stopping: the lane's next batch goes to a new job. */
  stopping(): boolean;
}): LaneSlice {
  const { job, fair } = options;
  const owner = String(job.id);
  let slot: FairSlot | undefined;
  let permit: KeyPermit | undefined;
  let batches = 0;
  // Whether the last take() got an answer from the fair share (decideNext: which slot to free).
  let slotAsked = false;
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

  // The fair share first, then the key: a key at its limit frees the slot it took at once, so
  // the slot goes to work that can run (another key, another organization).
  const take = async (): Promise<Refusal | undefined> => {
    slot = fair ? await fair.acquire(options.organizationId, owner) : undefined;
    slotAsked = true;
    if (fair && !slot) {
      return { by: 'fair_share' };
    }
    return takeKey();
  };

  /** The batch's items under its key's limits (the slot is already held). */
  const takeKey = async (): Promise<Refusal | undefined> => {
    const { keys } = options;
    if (!keys) {
      return undefined;
    }
    const decision = await keys.limiter
      .acquire({ key: keys.key, operationId: keys.operationId, member: `${owner} ${++batches}`, want: keys.want })
      .catch((error: unknown) => {
        release();
        throw error;
      });
    if ('refusal' in decision) {
      release();
      return { by: 'key_limit', refusal: decision.refusal };
    }
    permit = decision.permit;
    return undefined;
  };

  const release = () => {
    permit?.release();
    permit = undefined;
    slot?.release();
    slot = undefined;
  };

  return {
    start: take,
    granted: () => permit?.items,
    leased: async (count) => {
      await permit?.settle(count);
      if (count === 0) {
        permit = undefined; // its hold ended and its tokens went back: nothing is granted now
      }
    },
    async regrant() {
      if (!options.keys || permit) {
        return true;
      }
      return (await takeKey()) === undefined;
    },
    async decideNext() {
      if (Date.now() >= options.endsAt || options.stopping()) {
        return 'enqueue';
      }
      // The key's items go back now. The slot is kept while the next batch asks for one: the
      // store's acquire replaces this job's own entry (one round trip, where a release and then
      // an acquire took two), and only a lane that does not go on frees it, waking a parked job.
      permit?.release();
      permit = undefined;
      const held = slot;
      slot = undefined;
      slotAsked = false;
      try {
        if (!(await holdsJob())) {
          held?.release();
          return 'stop';
        }
        // The next batch takes a slot (and its key's items) of its own, as a new job would:
        // another organization waiting its turn gets it, and this lane goes back to the queue
        // (where a key at its limit parks it).
        const refused = await take();
        if (refused) {
          // A key's refusal has freed the slot just taken (the same entry); a fair share's, none.
          if (refused.by === 'fair_share') {
            held?.release();
          }
          return 'enqueue';
        }
        return 'go';
      } catch (error) {
        // The slot just taken, if any, was freed where the error arose; else free the old one.
        if (!slotAsked) {
          held?.release();
        }
        throw error;
      }
    },
    release,
  };
}
