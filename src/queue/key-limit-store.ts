/**
 * What the fleet's provider limits per key keep where every worker process sees them
 * (queue/key-limiter.ts decides with them): per key, a token bucket for its rate, the holds of
 * the batches running on it (items, with an expiry their process keeps renewing, so a dead
 * process's items come free by themselves) and the jobs parked while the key was at its
 * concurrency. Redis keeps them in a hash and sorted sets decided by one script
 * (key-limits-redis.ts); the Postgres queue backend in UNLOGGED tables of its schema decided in
 * one locked transaction (key-limits-postgres.ts); both apply domain/key-limits.ts's rule.
 */
import type { KeyGrant, KeyLimits } from '../domain/key-limits.ts';

export interface KeyAcquireRequest {
  /** The full limit key (`<organization id>[:<key>]`). */
  key: string;
  /**
   * The batch's hold, `<job id> <batch number>`: unique per batch, so ending one batch's hold can
   * never end the next one's (on Postgres the two may arrive in either order).
   */
  member: string;
  /** Items the batch would lease (its batch size). */
  want: number;
  limits: KeyLimits;
  now: number;
  /** When the hold lapses unless renewed. */
  expiry: number;
}

export interface KeyLimitStore {
  /**
   * Grants the batch up to `want` items (its hold is then `items`), or tells it to wait. A job
   * refused at the concurrency is parked for the key in the same step (so the next release
   * wakes it, however soon); one granted is no longer parked.
   */
  acquire(request: KeyAcquireRequest): Promise<KeyGrant>;
  /**
   * The batch leased `leased` of the `granted` items: the tokens it did not use go back to the
   * bucket and its hold shrinks to `leased` (none when 0; the longest-parked job is then returned
   * to be woken).
   */
  settle(request: {
    key: string;
    member: string;
    granted: number;
    leased: number;
    limits: KeyLimits;
    now: number;
  }): Promise<string | undefined>;
  /** Ends a batch's hold and takes the longest-parked job id of the key, if any. */
  release(key: string, member: string): Promise<string | undefined>;
  /** Renews the holds of the batches this process runs. */
  renew(holds: readonly { key: string; member: string }[], expiry: number): Promise<void>;
  /**
   * Whether the key's live holds leave room under `concurrency`: a job parked at it asks once
   * its delay is set, in case the release that should wake it came first.
   */
  hasRoom(key: string, concurrency: number, now: number): Promise<boolean>;
  /** Deletes what lapsed or idled out for good (Postgres; Redis expires its keys itself). */
  sweep(now: number): Promise<void>;
}
