/**
 * Open event streams per API key, counted across every API process: a capped lease per stream,
 * kept by the queue backend (a sorted set in Redis, or a table of the Postgres queue schema) by
 * the store's clock, so the processes' clocks need not agree. A stream renews its lease while it
 * runs and releases it when it ends; a process that dies leaves leases that lapse within
 * `leaseMs`, so a crash never keeps a key's slots taken for good. Taking a slot never exceeds
 * the cap, however many processes take at once.
 *
 * If the store does not answer, a stream opens anyway (and a warning is logged): losing the
 * counter must not take the event streams down with it, as with the per-key request limit.
 */
import { randomUUID } from 'node:crypto';
import type { Logger } from '../logger.ts';
import type { CappedLeases } from '../queue/backend.ts';
import { throttledWarning } from './window-counter.ts';

export interface StreamSlot {
  /** Extends the lease; call it well within `leaseMs`. */
  renew(): Promise<void>;
  release(): Promise<void>;
}

export interface StreamSlots {
  readonly maxPerKey: number;
  /** A slot for one more stream of `keyId`, or null when the key holds `maxPerKey` already. */
  acquire(keyId: string): Promise<StreamSlot | null>;
}

const NO_SLOT: StreamSlot = { renew: async () => {}, release: async () => {} };

export function streamSlots(
  leases: CappedLeases,
  { maxPerKey, leaseMs }: { maxPerKey: number; leaseMs: number },
  logger: Logger,
): StreamSlots {
  const warn = throttledWarning((error) =>
    logger.warn({ err: error }, 'stream counter unavailable; opening event streams without the per-key cap'),
  );
  return {
    maxPerKey,
    async acquire(keyId) {
      const key = `streams:${keyId}`;
      const member = randomUUID();
      try {
        if (!(await leases.acquire(key, member, leaseMs, maxPerKey))) {
          return null;
        }
      } catch (error) {
        warn(error);
        return NO_SLOT;
      }
      return {
        async renew() {
          await leases.renew(key, member, leaseMs).catch(warn);
        },
        async release() {
          await leases.release(key, member).catch(warn);
        },
      };
    },
  };
}
