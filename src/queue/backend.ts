/**
 * Where BullMQ keeps opspad's jobs: Redis, or BullMQ's PostgreSQL backend (on the server in
 * DATABASE_URL, or in the embedded PGlite). One {@link QueueBackend} is built per process from
 * the configuration, and everything queue-related takes it instead of a Redis connection and a
 * prefix: the queues and workers, the pause/cancel control channel, the per-key request
 * counter, the readiness check and the close. Postgres stays the source of truth either way.
 */
import type { Processor, Queue, QueueOptions, Worker, WorkerOptions } from 'bullmq';
import type { QueueBackendKind } from '../config/env.ts';
import type { ControlChannel } from './control-channel.ts';
import type { FairRegistration, FairShareStore } from './fair-share-store.ts';
import type { KeyLimitStore } from './key-limit-store.ts';

export type { QueueBackendKind } from '../config/env.ts';

/**
 * Fixed-window counters shared by every process of the deployment (the per-key request limit,
 * failed sign-ins per address). `window` is the window's index (`floor(now / windowMs)`); a
 * counter is forgotten `ttlMs` after it was last hit.
 */
export interface WindowCounter {
  /** Counts one hit of `key` in `window`, and returns the window's count so far. */
  increment(key: string, window: number, ttlMs: number): Promise<number>;
  /** The count of `key` in `window`, without adding to it (0 when there is none). */
  read(key: string, window: number): Promise<number>;
}

/**
 * Leases with a cap per key, shared by every process (open event streams per API key). A lease
 * lapses `leaseMs` after it was taken or last renewed, by the store's clock (the processes'
 * clocks need not agree), so a process that dies never holds a slot for good.
 */
export interface CappedLeases {
  /** Takes a lease for `member` on `key` unless `cap` live ones exist; true when taken. */
  acquire(key: string, member: string, leaseMs: number, cap: number): Promise<boolean>;
  /** Extends a lease that has not lapsed. */
  renew(key: string, member: string, leaseMs: number): Promise<void>;
  release(key: string, member: string): Promise<void>;
}

/** What opspad's queue and worker modules may set; the backend supplies connection and namespace. */
export type QueueSettings = Omit<QueueOptions, 'connection' | 'prefix'>;
export type WorkerSettings = Omit<WorkerOptions, 'connection' | 'prefix'>;

export interface QueueBackend {
  readonly kind: QueueBackendKind;
  /** Where the jobs live, for logs (no credentials): `redis://host:port (key prefix opspad)`, … */
  readonly location: string;
  /** What keeps this deployment's jobs apart: the Redis key prefix, or the Postgres schema. */
  readonly namespace: string;
  createQueue(name: string, settings?: QueueSettings): Queue;
  createWorker(name: string, processor: Processor, settings?: WorkerSettings): Worker;
  readonly control: ControlChannel;
  readonly counter: WindowCounter;
  readonly leases: CappedLeases;
  /** Where the workers of every process agree on the fair share of `operationType`'s slots. */
  fairShare(operationType: string): FairShareStore;
  /** Where the workers of every process agree on `operationType`'s provider limits per key. */
  keyLimits(operationType: string): KeyLimitStore;
  /**
   * The worker processes taking jobs from the batch queue `queueName` (from any batch queue when
   * null), as their fair-share registrations have them. Only where BullMQ's own listing cannot
   * see them: on the Postgres backend (postgres-backend.ts); Redis names each worker's connection.
   */
  registeredWorkers?(queueName: string | null): Promise<FairRegistration[]>;
  /** `/readyz` checks by name: each resolves when its dependency answers. */
  readonly readinessChecks: Record<string, () => Promise<void>>;
  /** Closes every connection the backend opened; queues and workers must be closed first. */
  close(): Promise<void>;
  /** Drops every connection now, without waiting (shutdown ran out of time). */
  force(): void;
}
