/**
 * The operation lifecycle as one table: for each action and each status, whether the action is
 * refused, leaves the operation as it is, or moves it to a new status with an audit event. The
 * store's control modules read their decisions here and only carry them out, so the rules can be
 * read (and tested) without a database.
 *
 * Conditions that depend on more than the status stay with their callers: `complete` refuses
 * while items remain unless forced, `complete_if_done` only fires when every item is recorded,
 * `retry_failed` needs failed items, and a lease needs the current dispatch epoch.
 */
import type { ItemStatus, OperationStatus } from './operation.ts';

/** The actions that read or change an operation's status. */
export const LIFECYCLE_ACTIONS = [
  'lease',
  'record',
  'pause',
  'resume',
  'complete',
  'complete_if_done',
  'cancel',
  'breaker_trip',
  'retry_failed',
  'approve',
  'reject',
] as const;
export type LifecycleAction = (typeof LIFECYCLE_ACTIONS)[number];

/** The audit events a status change writes (a subset of the stream's event kinds). */
export type LifecycleEvent = 'paused' | 'resumed' | 'completed' | 'cancelled' | 'approved' | 'rejected';

export type Transition =
  /** The action goes ahead and the status becomes `to`, recorded as `event`. */
  | { kind: 'change'; to: OperationStatus; event: LifecycleEvent }
  /** The action is allowed and changes no status (a lease, a record, a repeated pause…). */
  | { kind: 'allowed' }
  /** The action asks for what is already so: answered with the operation as it is. */
  | { kind: 'already' }
  /** The action cannot happen in this status; `verb` completes "it cannot be …". */
  | { kind: 'refused'; verb: string };

const allowed: Transition = { kind: 'allowed' };
const already: Transition = { kind: 'already' };
const refused = (verb: string): Transition => ({ kind: 'refused', verb });
const to = (status: OperationStatus, event: LifecycleEvent): Transition => ({ kind: 'change', to: status, event });
/** What `get` and `progress` tell a model about an operation awaiting approval. */
export const AWAITING_APPROVAL_ADVICE =
  "It awaits the user's approval before it starts (its organization asks a person to approve operations of this size): tell the user, and get it again later; it leases nothing until then.";

/** What an operation awaiting approval refuses until a person decides (cancel is still allowed). */
const untilApproved = (verb: string): Transition => refused(`${verb} until a person approves it`);

/**
 * action × status → transition. A paused operation hands out no new batch but its leased
 * batches may still be recorded and renewed; finished operations change no more.
 */
export const LIFECYCLE: Readonly<Record<LifecycleAction, Readonly<Record<OperationStatus, Transition>>>> = {
  // Active: the caller's own batch, else a new one. Paused: its own batch only (renewed), no new
  // one. Finished: nothing, and no error (a worker's last look finds the end).
  lease: {
    active: allowed,
    paused: already,
    completed: refused('leased'),
    cancelled: refused('leased'),
    awaiting_approval: untilApproved('leased'),
  },
  record: {
    active: allowed,
    paused: allowed,
    completed: refused('recorded'),
    cancelled: refused('recorded'),
    awaiting_approval: untilApproved('recorded'),
  },
  pause: {
    active: to('paused', 'paused'),
    paused: already,
    completed: refused('paused'),
    cancelled: refused('paused'),
    awaiting_approval: untilApproved('paused'),
  },
  resume: {
    active: already,
    paused: to('active', 'resumed'),
    completed: refused('resumed'),
    cancelled: refused('resumed'),
    awaiting_approval: untilApproved('resumed'),
  },
  complete: {
    active: to('completed', 'completed'),
    paused: to('completed', 'completed'),
    completed: already,
    cancelled: refused('completed'),
    awaiting_approval: untilApproved('completed'),
  },
  // Workers and the reconciler: a pause that landed first wins, so only an active one completes.
  complete_if_done: {
    active: to('completed', 'completed'),
    paused: already,
    completed: already,
    cancelled: already,
    awaiting_approval: already,
  },
  cancel: {
    active: to('cancelled', 'cancelled'),
    paused: to('cancelled', 'cancelled'),
    completed: refused('cancelled'),
    cancelled: already,
    awaiting_approval: to('cancelled', 'cancelled'),
  },
  // The circuit breaker pauses only what is running; a record on a paused operation keeps it so.
  breaker_trip: {
    active: to('paused', 'paused'),
    paused: already,
    completed: already,
    cancelled: already,
    awaiting_approval: already,
  },
  // The source operation keeps its status; the retry is a new operation.
  retry_failed: {
    active: allowed,
    paused: allowed,
    completed: allowed,
    cancelled: allowed,
    awaiting_approval: allowed,
  },
  // A person's decision on an operation awaiting approval: a rejection cancels it.
  approve: {
    active: already,
    paused: already,
    completed: refused('approved'),
    cancelled: refused('approved'),
    awaiting_approval: to('active', 'approved'),
  },
  reject: {
    active: refused('rejected (it was approved; cancel it instead)'),
    paused: refused('rejected (it was approved; cancel it instead)'),
    completed: refused('rejected'),
    cancelled: already,
    awaiting_approval: to('cancelled', 'rejected'),
  },
};

/** What `action` does to an operation in `status`. */
export function transition(action: LifecycleAction, status: OperationStatus): Transition {
  return LIFECYCLE[action][status];
}

/** The statuses in which `action` goes ahead on its own (allowed, or a change of status). */
export function statusesAllowing(action: LifecycleAction): OperationStatus[] {
  return (Object.keys(LIFECYCLE[action]) as OperationStatus[]).filter((status) => {
    const { kind } = LIFECYCLE[action][status];
    return kind === 'allowed' || kind === 'change';
  });
}

/**
 * An item's statuses on the lease and record path: a lease takes pending items (a leased item
 * stays pending while a live lease row names it, and reads as `leased` where it is shown), a
 * record ends one as completed or failed, a cancel or forced complete abandons the rest. The
 * statements of the general path (store/leases/item-sql.ts) are built from these; the step
 * functions (src/store/leases/sql/) spell them as literals and a test holds them to this list.
 */
export const ITEM_LEASABLE = 'pending' satisfies ItemStatus;
export const ITEM_SHOWN_LEASED = 'leased' satisfies ItemStatus;
export const ITEM_COMPLETED = 'completed' satisfies ItemStatus;
export const ITEM_FAILED = 'failed' satisfies ItemStatus;
export const ITEM_ABANDONED = 'abandoned' satisfies ItemStatus;
export const ITEM_RECORDED = [ITEM_COMPLETED, ITEM_FAILED] as const satisfies readonly ItemStatus[];
/** An item in one of these was recorded before (a report naming it again is answered, not applied). */
export const ITEM_DONE = [...ITEM_RECORDED, ITEM_ABANDONED] as const satisfies readonly ItemStatus[];
