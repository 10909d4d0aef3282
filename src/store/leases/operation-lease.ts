/**
 * The `progress` action and the leases around it: hand out the next batch, renew, extend,
 * release and reclaim. The lease statement itself is the function opspad_lease_items
 * (sql/opspad_lease_items.sql, called as item-sql.ts LEASE_NEXT_SQL): a lease is a row
 * of assistant_operation_lease and writes nothing to its items.
 *
 * Lock order: the operation row (its update lock for the usual lease, which the step functions'
 * leases take too, so that they may read their batches without locking them; exclusive when the
 * cursor may move back), read with whether any lease has expired → the batch's item rows (`FOR
 * UPDATE SKIP LOCKED`) and the owner's lease row, in that order, in one call → the event, the
 * spent lease rows and the operation row's cursor, last, in one statement just before commit
 * (operation-tail.ts).
 * Cost per lease: O(batch) and six round trips (begin, lock, renew, lease, tail, commit), five
 * when the caller holds no lease row (the lock's read says so, and nothing is renewed) —
 * the caller's own batch and the new one by primary key, the operation's lease rows (a handful),
 * one event, one primary-key update. Nothing reads the items already finished.
 */
import type { OperationCounts, OperationRecord } from '../../domain/operation.ts';
import { countsOf } from '../../domain/operation.ts';
import { transition } from '../../domain/operation-lifecycle.ts';
import type { Database, Queryable } from '../db/db.ts';
import { appendEvent } from '../operations/event-repo.ts';
import { lockOperation, lockOperationForLease, resolveOperationId, setCursor } from '../operations/operation-row.ts';
import type { ConversationScope } from '../tenants/conversation-repo.ts';
import {
  countInFlight,
  countInFlightDroppingSpent,
  countPending,
  type LeasedItem,
  leaseNext,
  releaseExpiredLeases,
  releaseOwnedItems,
  renewOwnLease,
} from './item-sql.ts';
import { closeStep } from './operation-tail.ts';
import { leaseStep } from './step-calls.ts';

export interface LeaseParams {
  operationId?: string | null;
  owner: string;
  leaseSeconds: number;
  /** Overrides the operation's batch size (a handler's own batch size). */
  batchSize?: number;
  /** Workers: lease nothing new unless this is still the operation's dispatch epoch. */
  epoch?: number;
}

export interface LeaseResult {
  operation: OperationRecord;
  batch: string[];
  counts: OperationCounts;
  /** Items of expired leases this call returned to pending. */
  reclaimed: number;
}

/**
 * The `progress` action: the caller's current batch if it holds one (its lease renewed),
 * otherwise the next batch from the cursor, leased to the caller. Expired leases go back to
 * pending first. Paused and finished operations hand out no new batch.
 *
 * Two modes of one transaction (leaseIn). The usual one leases under the operation row's update
 * lock, as the step functions' leases do (their records of workers' own leases go on beside
 * it): `FOR UPDATE SKIP LOCKED`
 * and the live lease rows give it a batch of its own, and the cursor only moves forward. Whatever can move the
 * cursor back or needs an exact view — expired leases to reclaim, or nothing found from the cursor
 * (the operation's end, every remaining item in flight, or items a failed concurrent lease left
 * behind it) — goes to the exclusive mode, which runs alone: the rules are then those of a single
 * leaser.
 */
export async function leaseBatch(db: Database, scope: ConversationScope, params: LeaseParams): Promise<LeaseResult> {
  // The usual cases first, in one round trip (step-calls.ts): a batch from the cursor, or none when
  // no item is pending at all. The call changes nothing when the case is another.
  const step = params.operationId ? await leaseStep(db, scope, { ...params, operationId: params.operationId }) : null;
  if (step) {
    return { ...step, reclaimed: 0 };
  }
  const shared = await db.transaction((tx) => leaseIn(tx, scope, params, 'shared'));
  return shared ?? ((await db.transaction((tx) => leaseIn(tx, scope, params, 'exclusive'))) as LeaseResult);
}

/** A new batch taken, and where the cursor goes after it (null: where it is). */
interface Taken {
  batch: LeasedItem[];
  cursor: number | null;
  reclaimed: number;
}

/** One lease transaction; null (shared mode only) when the exclusive mode must decide. */
async function leaseIn(
  tx: Queryable,
  scope: ConversationScope,
  params: LeaseParams,
  mode: 'shared' | 'exclusive',
): Promise<LeaseResult | null> {
  const operationId = await resolveOperationId(tx, scope, params.operationId);
  const locked = await lockOperationForLease(tx, scope, operationId, mode, params.owner, params.epoch);
  let op = locked.op;
  const rule = transition('lease', op.status);
  let batch =
    rule.kind === 'refused' || !locked.ownsLease
      ? []
      : await renewOwnLease(tx, op.id, params.owner, params.leaseSeconds);
  let reclaimed = 0;
  if (batch.length === 0 && rule.kind === 'allowed' && locked.epochMatches) {
    const taken =
      mode === 'shared'
        ? await takeShared(tx, op, params, locked.expiredLeases)
        : await takeExclusive(tx, scope, op, params);
    if (!taken) {
      return null; // nothing changed yet: the exclusive mode looks again, exactly
    }
    ({ batch, reclaimed } = taken);
    const first = batch[0];
    const last = batch.at(-1);
    const events =
      first && last
        ? [
            {
              organizationId: scope.organizationId,
              kind: 'batch_leased' as const,
              actor: params.owner,
              data: { count: batch.length, first_ordinal: first.ordinal, last_ordinal: last.ordinal },
            },
          ]
        : [];
    let inFlight: number;
    if (taken.cursor !== null) {
      // Last, just before commit: the cursor only moves forward in the shared mode.
      const cursor = taken.cursor;
      ({ operation: op, inFlight } = await closeStep(tx, op.id, events, {
        kind: mode === 'shared' ? 'cursor_forward' : 'cursor_set',
        cursor,
      }));
    } else {
      for (const event of events) {
        await appendEvent(tx, { operationId: op.id, ...event });
      }
      inFlight = await countInFlightDroppingSpent(tx, op.id);
    }
    return { operation: op, batch: batch.map((b) => b.item_id), counts: countsOf(op, inFlight), reclaimed };
  }
  const inFlight = await countInFlight(tx, op.id);
  return { operation: op, batch: batch.map((b) => b.item_id), counts: countsOf(op, inFlight), reclaimed };
}

/** Shared mode: the next batch from the cursor, or null when only the exclusive mode can tell. */
async function takeShared(
  tx: Queryable,
  op: OperationRecord,
  params: LeaseParams,
  expiredLeases: boolean,
): Promise<Taken | null> {
  if (expiredLeases) {
    return null;
  }
  const limit = params.batchSize ?? op.state_json.batch_size;
  const batch = await leaseNext(tx, op.id, params.owner, params.leaseSeconds, op.state_json.cursor, limit, true);
  const last = batch.at(-1);
  return last ? { batch, cursor: last.ordinal + 1, reclaimed: 0 } : null;
}

/** Exclusive mode: alone on the operation, so its view is exact. */
async function takeExclusive(
  tx: Queryable,
  scope: ConversationScope,
  op: OperationRecord,
  params: LeaseParams,
): Promise<Taken> {
  const { cursor, released } = await reclaimExpired(tx, scope, op, params.owner);
  const limit = params.batchSize ?? op.state_json.batch_size;
  let batch = await leaseNext(tx, op.id, params.owner, params.leaseSeconds, cursor, limit, false);
  if (batch.length === 0 && cursor > 0) {
    // Pending items behind the cursor can only be left by a concurrent lease that rolled back
    // after another moved the cursor past its rows. Rare: look from the start once.
    if ((await countPending(tx, op)) > 0) {
      batch = await leaseNext(tx, op.id, params.owner, params.leaseSeconds, 0, limit, false);
    }
  }
  const last = batch.at(-1);
  // Nothing pending at or after the cursor: jump it to the end so later scans are empty.
  const nextCursor = last ? last.ordinal + 1 : op.total_items;
  return { batch, cursor: nextCursor === op.state_json.cursor ? null : nextCursor, reclaimed: released };
}

/**
 * Returns expired leases of the locked operation to pending, lowering the cursor to the first
 * of them so the next lease scan finds them. Returns the cursor to scan from.
 */
async function reclaimExpired(
  tx: Queryable,
  scope: ConversationScope,
  op: OperationRecord,
  actor: string,
): Promise<{ cursor: number; released: number }> {
  const expired = await releaseExpiredLeases(tx, op.id);
  if (expired.released === 0 || expired.lowestOrdinal === null) {
    return { cursor: op.state_json.cursor, released: 0 };
  }
  await appendEvent(tx, {
    operationId: op.id,
    organizationId: scope.organizationId,
    kind: 'lease_expired',
    actor,
    data: { released: expired.released },
  });
  return { cursor: Math.min(op.state_json.cursor, expired.lowestOrdinal), released: expired.released };
}

/** Returns the operation's expired leases to pending (and its cursor to the first of them). */
export async function reclaimExpiredLeases(
  db: Database,
  scope: ConversationScope,
  operationId: string,
  actor: string,
): Promise<OperationRecord> {
  return db.transaction(async (tx) => {
    const op = await lockOperation(tx, scope, operationId);
    const { cursor } = await reclaimExpired(tx, scope, op, actor);
    return cursor === op.state_json.cursor ? op : setCursor(tx, op.id, cursor);
  });
}

/**
 * Gives back items leased to `owner` that it will not handle (a worker stopping mid-batch on
 * pause, cancel or shutdown), so they are handed out again without waiting for the lease to
 * expire. Returns how many were released.
 */
export async function releaseLeasedItems(
  db: Database,
  scope: ConversationScope,
  operationId: string,
  owner: string,
  itemIds: readonly string[],
): Promise<number> {
  if (itemIds.length === 0) {
    return 0;
  }
  return db.transaction(async (tx) => {
    const op = await lockOperation(tx, scope, operationId);
    const released = await releaseOwnedItems(tx, op.id, owner, itemIds);
    if (released.released > 0 && released.lowestOrdinal !== null && released.lowestOrdinal < op.state_json.cursor) {
      await setCursor(tx, op.id, released.lowestOrdinal);
    }
    return released.released;
  });
}

/**
 * Extends the leases `owner` holds on the operation's items (a worker's heartbeat while its
 * handler runs), so a slow batch is not handed to another worker while it is still being done.
 * One statement, no operation lock: it touches only the owner's lease row (a lease's expiry is
 * kept there alone); it returns how many items that lease still holds. A lease that has expired
 * stays expired: a record that has seen it expired may be taking its items already (their rows
 * do not say they are leased), and reviving it would hand them to two.
 */
export async function extendLeases(
  db: Queryable,
  scope: ConversationScope,
  operationId: string,
  owner: string,
  leaseSeconds: number,
): Promise<number> {
  const rows = await db.query<{ n: number }>(
    `WITH extended AS (
       UPDATE assistant_operation_lease l SET expires_at = now() + make_interval(secs => $3)
       FROM assistant_operation o
       WHERE l.operation_id = $1 AND l.owner = $2 AND l.remaining > 0 AND l.expires_at >= now()
         AND o.id = l.operation_id AND o.organization_id = $4
       RETURNING l.remaining)
     SELECT coalesce(sum(remaining), 0)::int AS n FROM extended`,
    [operationId, owner, leaseSeconds, scope.organizationId],
  );
  return rows[0]?.n ?? 0;
}
