/**
 * Fair share of a handler type's worker slots across organizations, for the whole fleet.
 *
 * BullMQ hands a free slot the job at the head of the queue, whoever it belongs to. Before a
 * batch job leases anything, its worker asks the queue backend — atomically for every process
 * sharing the queue (a Redis script, or a locked Postgres transaction: fair-share-store.ts) —
 * whether the job's organization may start one more batch under the rule of
 * domain/fair-share.ts, given:
 * - the fleet's slots: every worker process registers its concurrency for the type, with an
 *   expiry it keeps renewing (a dead process drops out by itself);
 * - the batches running now, by organization: an entry per running batch, with an expiry the
 *   running process renews (a dead process's entries drop out by themselves);
 * - who is waiting: the organizations with work of the type not yet handed out, with their
 *   fair-share weights (the candidate's own carried beside them), read from Postgres (the source
 *   of truth) and cached. A counter in the store ("arrivals"), incremented before
 *   the jobs of a newly started operation are queued, tells the script when the cache predates a
 *   newcomer, so a decision is never taken on a view that misses an organization whose job is in
 *   the queue.
 * A job refused is parked — moved to the delayed set and noted in a parked set — instead of
 * holding the slot; the slot takes the next job. Every slot freed (a lane that stops, or that is
 * refused its next batch: a lane going on asks again with its slot held) wakes the longest-parked
 * job, and a timer wakes as many as this process has idle slots, so parked work comes back as
 * soon as there is room (a parked job also wakes by itself after `parkMs`, should every wake-up
 * be lost).
 */
import type { Job, Queue } from 'bullmq';
import { FAIR_SHARE_WEIGHT } from '../domain/fair-share.ts';
import type { Logger } from '../logger.ts';
import { type Database, listWaitingOrganizations } from '../store/index.ts';
import type { FairRegistration, FairShareStore } from './fair-share-store.ts';

export interface FairShareOptions {
  /** Where the fleet's state lives (the queue backend's). */
  store: FairShareStore;
  /** The type's queue, to wake parked jobs. */
  queue: Queue;
  db: Database;
  /** This deployment's queue prefix: only its own operations are waiting work. */
  prefix: string;
  operationType: string;
  /** This process's slots for the type (the worker's concurrency). */
  slots: number;
  /** The handler's fixed batch size, if it has one. */
  batchSize: number | undefined;
  /** Unique per process: names its registration. */
  workerId: string;
  /** How long a registration or running entry lives without being renewed. */
  entryTtlMs: number;
  /** How long a refused job stays parked unless woken. */
  parkMs: number;
  /** How long the waiting view is trusted when no arrival says otherwise. */
  viewTtlMs?: number;
  logger: Logger;
}

/** A started batch's hold on its slot. */
export interface FairSlot {
  /** Frees the slot (idempotent) and wakes the longest-parked job. */
  release(): void;
}

export interface FairShare {
  /** A slot for a batch of `organizationId`, or undefined when it must wait its turn. */
  acquire(organizationId: string, jobId: string): Promise<FairSlot | undefined>;
  /** Parks a refused job (the processor then throws BullMQ's DelayedError). */
  park(job: Job, token: string | undefined): Promise<void>;
  close(): Promise<void>;
}

interface WaitingView {
  arrivals: string;
  at: number;
  waiting: [string, number, number][];
  /** Weights of the organizations with active work of the type, waiting or not. */
  weights: ReadonlyMap<string, number>;
}

export function createFairShare(options: FairShareOptions): FairShare {
  const { store } = options;
  const registration: FairRegistration = { id: options.workerId, slots: options.slots };
  const viewTtlMs = options.viewTtlMs ?? 1000;
  /** Members (`<organization> <job id>`) of the batches this process runs. */
  const mine = new Set<string>();
  let view: WaitingView | undefined;
  let refreshing: Promise<WaitingView> | undefined;
  let closed = false;
  const registered = store
    .heartbeat(registration, [], Date.now() + options.entryTtlMs, 0)
    .catch((error: unknown) => options.logger.warn({ err: error }, 'could not register for the fair share'));

  const refresh = (arrivals: string): Promise<WaitingView> => {
    refreshing ??= listWaitingOrganizations(options.db, {
      operationType: options.operationType,
      queuePrefix: options.prefix,
      batchSize: options.batchSize,
    })
      .then(({ waiting, weights }) => {
        // Read after the arrivals count it is stamped with: it includes every arrival counted.
        view = { arrivals, at: Date.now(), waiting, weights };
        return view;
      })
      .finally(() => {
        refreshing = undefined;
      });
    return refreshing;
  };

  const wake = async (jobIds: readonly string[]) => {
    for (const id of jobIds) {
      const job = await options.queue.getJob(id);
      // Already woken by its delay, or gone: nothing to do.
      await job?.promote().catch(() => {});
    }
  };

  const heartbeat = async () => {
    const idle = options.slots - mine.size;
    const parked = await store.heartbeat(registration, [...mine], Date.now() + options.entryTtlMs, Math.max(0, idle));
    await wake(parked);
  };
  const timer = setInterval(
    () => {
      heartbeat().catch((error: unknown) => options.logger.warn({ err: error }, 'fair-share heartbeat failed'));
    },
    Math.max(50, Math.floor(Math.min(options.entryTtlMs / 3, viewTtlMs))),
  );
  timer.unref();

  return {
    async acquire(organizationId, jobId) {
      const member = `${organizationId} ${jobId}`;
      await registered;
      let current = view && Date.now() - view.at < viewTtlMs ? view : undefined;
      let started = false;
      // Twice is enough unless operations arrive faster than a view is read; then start anyway
      // (counted) rather than keep the slot idle.
      for (let asked = 0; asked < 3 && !started; asked++) {
        const { code, arrivals } = await store.acquire({
          now: Date.now(),
          organizationId,
          member,
          expiry: Date.now() + options.entryTtlMs,
          arrivals: current?.arrivals ?? '',
          waiting: current?.waiting ?? [],
          // Unknown to the view (no view yet, or none of its work active when read): 1. A view
          // missing a newcomer is refreshed by the arrivals count before anything is decided.
          weight: current?.weights.get(organizationId) ?? FAIR_SHARE_WEIGHT.default,
        });
        if (code === 0) {
          return undefined;
        }
        started = code === 1;
        if (!started) {
          current = await refresh(arrivals);
        }
      }
      if (!started) {
        await store.forceStart(member, organizationId, Date.now() + options.entryTtlMs);
      }
      mine.add(member);
      let released = false;
      return {
        release() {
          if (released) {
            return;
          }
          released = true;
          mine.delete(member);
          if (closed) {
            void store.drop(member).catch(() => {});
            return;
          }
          store
            .finish(member)
            .then((parked) => (parked ? wake([parked]) : undefined))
            .catch((error: unknown) => options.logger.warn({ err: error }, 'could not free a fair-share slot'));
        },
      };
    },
    async park(job, token) {
      await job.moveToDelayed(Date.now() + options.parkMs, token);
      await store.park(String(job.id), Date.now());
    },
    async close() {
      closed = true;
      clearInterval(timer);
      await store.unregister(registration).catch(() => {});
    },
  };
}
