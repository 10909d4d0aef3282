/**
 * A worker process's side of a handler type's provider limits per key (domain/key-limits.ts),
 * held for the whole fleet by the queue backend (key-limit-store.ts).
 *
 * Before a batch leases, it asks its key for items: it gets up to its batch size, and leases no
 * more than that (the items it did not lease go back at once). A key at its limit refuses: the
 * job is parked — moved to the delayed set, freeing its worker slot for another key's work —
 * until the rate has the tokens it wants (a precise delay), or, at the key's concurrency, until a
 * batch of the key ends and wakes the longest-parked job (with the fair share's park time as a
 * fallback, should the wake-up be lost). The operation is noted as throttled for a few seconds
 * past its last park, so `get` and the context fragment tell the assistant it waits on (or runs
 * at the pace of) a provider limit.
 *
 * The limits in force for a key are the handler's own figures, replaced field by field by its
 * organization's override (`opspad orgs limits --handler`), read through a cache: an override
 * takes effect within OVERRIDE_CACHE_MS.
 */
import type { Job, Queue } from 'bullmq';
import { type KeyLimits, ownKeyOf, withOverride } from '../domain/key-limits.ts';
import type { Logger } from '../logger.ts';
import { clearThrottled, type Database, noteThrottled } from '../store/index.ts';
import type { KeyLimitStore } from './key-limit-store.ts';

/** How long an organization's override is trusted before it is read again. */
export const OVERRIDE_CACHE_MS = 5000;
/** Entries the override cache keeps before it starts over (keys are tenants' choice). */
const OVERRIDE_CACHE_MAX = 10_000;
/** How often one operation's throttled note is rewritten while it keeps waiting. */
const NOTE_EVERY_MS = 1000;
/**
 * How long a note says the operation is throttled, at least: an operation running at its key's
 * pace is parked and granted in turns, and stays "throttled" for as long as that goes on.
 */
const NOTE_FOR_MS = 3 * NOTE_EVERY_MS;
/** How often a process deletes the limits' lapsed state (keys are tenants' choice). */
const SWEEP_EVERY_MS = 60_000;

/** Looks up an organization's own figures for one of its keys ('' : its organization key). */
export type KeyLimitOverrideLookup = (
  organizationId: string,
  operationType: string,
  key: string,
) => Promise<KeyLimits | undefined>;

export interface KeyLimiterOptions {
  store: KeyLimitStore;
  /** The type's queue, to wake parked jobs. */
  queue: Queue;
  db: Database;
  operationType: string;
  /** The handler's own figures. */
  own: KeyLimits;
  override?: KeyLimitOverrideLookup;
  /** How long a hold lives without being renewed. */
  entryTtlMs: number;
  /** How long a job parked at a key's concurrency stays parked unless woken. */
  parkMs: number;
  logger: Logger;
}

export interface KeyPermit {
  /** Items the batch may lease. */
  readonly items: number;
  /** The batch leased `leased` items: the rest of the grant goes back. */
  settle(leased: number): Promise<void>;
  /** Ends the batch's hold (idempotent) and wakes a job parked at the key's concurrency. */
  release(): void;
}

export interface KeyRefusal {
  key: string;
  limits: KeyLimits;
  limitedBy: 'rate' | 'concurrency';
  waitMs: number;
}

export type KeyDecision = { permit: KeyPermit } | { refusal: KeyRefusal };

export interface KeyLimiter {
  acquire(batch: { key: string; operationId: string; member: string; want: number }): Promise<KeyDecision>;
  /** Parks a refused job (the processor then throws BullMQ's DelayedError). */
  park(job: Job, token: string | undefined, operationId: string, refusal: KeyRefusal): Promise<void>;
  close(): void;
}

export function createKeyLimiter(options: KeyLimiterOptions): KeyLimiter {
  const { store } = options;
  const overrides = new Map<string, { at: number; limits: KeyLimits | undefined }>();
  /** Holds of the batches this process runs, by member. */
  const holds = new Map<string, { key: string; member: string }>();
  /** Operations this process noted as throttled, with when and by which limit. */
  const noted = new Map<string, { at: number; limitedBy: KeyRefusal['limitedBy'] }>();

  const limitsFor = async (key: string): Promise<KeyLimits> => {
    if (!options.override) {
      return options.own;
    }
    const cached = overrides.get(key);
    if (cached && Date.now() - cached.at < OVERRIDE_CACHE_MS) {
      return withOverride(options.own, cached.limits);
    }
    const [organizationId] = key.split(':', 1) as [string];
    const limits = await options.override(organizationId, options.operationType, ownKeyOf(key));
    if (overrides.size >= OVERRIDE_CACHE_MAX) {
      overrides.clear();
    }
    overrides.set(key, { at: Date.now(), limits });
    return withOverride(options.own, limits);
  };

  const wake = async (jobId: string | undefined) => {
    if (jobId) {
      const job = await options.queue.getJob(jobId);
      // Already woken by its delay, or gone: nothing to do.
      await job?.promote().catch(() => {});
    }
  };
  const wakeQuietly = (jobId: string | undefined) =>
    wake(jobId).catch((error: unknown) => options.logger.warn({ err: error }, 'could not wake a parked job'));

  const renewEveryMs = Math.max(50, Math.floor(options.entryTtlMs / 3));
  let lastSweep = Date.now();
  const timer = setInterval(() => {
    store
      .renew([...holds.values()], Date.now() + options.entryTtlMs)
      .catch((error: unknown) => options.logger.warn({ err: error }, 'could not renew provider-limit holds'));
    if (Date.now() - lastSweep >= SWEEP_EVERY_MS) {
      lastSweep = Date.now();
      store
        .sweep(lastSweep)
        .catch((error: unknown) => options.logger.warn({ err: error }, 'could not sweep provider-limit state'));
    }
  }, renewEveryMs);
  timer.unref();

  return {
    async acquire(batch) {
      const limits = await limitsFor(batch.key);
      const grant = await store.acquire({
        key: batch.key,
        member: batch.member,
        want: batch.want,
        limits,
        now: Date.now(),
        expiry: Date.now() + options.entryTtlMs,
      });
      if (grant.items === 0) {
        return {
          refusal: { key: batch.key, limits, limitedBy: grant.limitedBy ?? 'concurrency', waitMs: grant.waitMs },
        };
      }
      if (noted.get(batch.operationId)?.limitedBy === 'concurrency') {
        // Its note said it waits for the key's batches to end: it runs again.
        noted.delete(batch.operationId);
        await clearThrottled(options.db, batch.operationId).catch(() => {});
      }
      const held = limits.concurrency !== undefined;
      if (held) {
        holds.set(batch.member, { key: batch.key, member: batch.member });
      }
      let released = false;
      return {
        permit: {
          items: grant.items,
          async settle(leased) {
            if (leased >= grant.items || released) {
              return;
            }
            const woken = await store.settle({
              key: batch.key,
              member: batch.member,
              granted: grant.items,
              leased,
              limits,
              now: Date.now(),
            });
            if (leased === 0) {
              released = true;
              holds.delete(batch.member);
            }
            await wakeQuietly(woken);
          },
          release() {
            if (released || !held) {
              return;
            }
            released = true;
            holds.delete(batch.member);
            store
              .release(batch.key, batch.member)
              .then(wakeQuietly)
              .catch((error: unknown) => options.logger.warn({ err: error }, 'could not free a provider-limit hold'));
          },
        },
      };
    },
    async park(job, token, operationId, refusal) {
      const now = Date.now();
      const atConcurrency = refusal.limitedBy === 'concurrency';
      await job.moveToDelayed(now + (atConcurrency ? options.parkMs : refusal.waitMs), token);
      // The refusal parked the job for the key's next release; one that came before the delay was
      // set found nothing to promote: look once, and come back at once if there is room.
      if (atConcurrency && (await store.hasRoom(refusal.key, refusal.limits.concurrency ?? 0, now))) {
        await job.promote().catch(() => {});
      }
      const last = noted.get(operationId);
      if (last === undefined || now - last.at >= NOTE_EVERY_MS) {
        if (noted.size >= OVERRIDE_CACHE_MAX) {
          noted.clear();
        }
        noted.set(operationId, { at: now, limitedBy: refusal.limitedBy });
        await noteThrottled(options.db, {
          operationId,
          key: ownKeyOf(refusal.key),
          limitedBy: refusal.limitedBy,
          limits: refusal.limits,
          // At the concurrency a job waits for a batch of the key to end, at most its park time
          // (the note goes when a batch of it is granted here); at the rate, until its tokens.
          untilMs: now + (atConcurrency ? options.parkMs : Math.max(NOTE_FOR_MS, refusal.waitMs)),
        }).catch((error: unknown) => options.logger.warn({ err: error }, 'could not note a throttled operation'));
      }
    },
    close() {
      clearInterval(timer);
    },
  };
}
