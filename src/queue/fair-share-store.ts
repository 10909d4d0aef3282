/**
 * What the fleet's fair share of a handler type's slots keeps where every worker process sees it
 * (queue/fair-share.ts decides with it): each process's registered slots, the batches running
 * by organization, the jobs parked while their organization waits its turn, and a count of
 * arrivals that tells a decider its view of the waiting organizations is stale. Registrations
 * and running entries carry an expiry their process keeps renewing, so a dead process drops out
 * by itself. Redis keeps it in sorted sets decided by one script (fair-share-redis.ts), the
 * Postgres queue backend in tables of its schema decided in one locked transaction
 * (fair-share-postgres.ts); both apply domain/fair-share.ts's rule.
 */

/** One worker process's share of the fleet: its id and its slots for the type. */
export interface FairRegistration {
  id: string;
  slots: number;
}

export interface FairAcquireRequest {
  now: number;
  organizationId: string;
  /** `<organization> <job id>`: the running entry the batch holds if it starts. */
  member: string;
  /** When the entry lapses unless renewed. */
  expiry: number;
  /** The arrivals count the caller's view is stamped with ('' when it has none). */
  arrivals: string;
  /**
   * Organizations waiting for the type's slots, with the lanes their work can use and their
   * fair-share weight (absent: 1).
   */
  waiting: readonly (readonly [organization: string, lanes: number, weight?: number])[];
  /** The candidate's own weight, known even when the view does not list it (absent: 1). */
  weight?: number;
}

export interface FairAcquireResult {
  /** 1: started (the entry is added); 0: refused; -1: the view predates an arrival. */
  code: 1 | 0 | -1;
  /** The arrivals count now, to stamp a refreshed view with. */
  arrivals: string;
}

export interface FairShareStore {
  /**
   * Registers `registration` (or renews it) and renews the entries of `running`; then takes
   * up to `wake` parked job ids, longest parked first, out of the parked set.
   */
  heartbeat(
    registration: FairRegistration,
    running: readonly string[],
    expiry: number,
    wake: number,
  ): Promise<string[]>;
  acquire(request: FairAcquireRequest): Promise<FairAcquireResult>;
  /** Counts a batch as running without deciding (a view that kept going stale). */
  forceStart(member: string, organizationId: string, expiry: number): Promise<void>;
  /** Ends a batch and takes the longest-parked job id out of the parked set, if any. */
  finish(member: string): Promise<string | undefined>;
  /** Ends a batch without waking anyone (the process is closing). */
  drop(member: string): Promise<void>;
  /** Notes a refused job as parked (its delay is set by the caller). */
  park(jobId: string, now: number): Promise<void>;
  unregister(registration: FairRegistration): Promise<void>;
  /** Tells the fleet that work of the type may have arrived (before its jobs are queued). */
  announceArrival(): Promise<void>;
}
