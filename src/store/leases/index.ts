/**
 * Leases and records: handing a worker its next batch (the `progress` action), renewing,
 * extending, releasing and reclaiming it, and recording outcomes (`update`) idempotently — the
 * ledger's guarantees (an item is leased to one owner at a time; a late worker never overwrites
 * the result of the one that took its lease over; counters move with the items, in one
 * transaction). Also what the worker fleet reads to share its slots (worker-demand.ts).
 *
 * Tables: assistant_operation_lease (its own: one row per batch in force), and the item rows
 * and counters of assistant_operation_item and assistant_operation (owned by operations/).
 *
 * Lock order, the same on every path: the operation row (shared; exclusive only when the cursor
 * may move back) → the circuit breaker's advisory lock (records of operations with
 * max_failure_rate) → the batch's item rows (a lease skips locked ones; a record locks its rows
 * in ordinal order) and the lease rows → the events, the spent lease rows and the operation
 * row's update, last, in one statement just before commit (operation-tail.ts).
 *
 * Each rule has one home (docs/architecture.md, "Who decides a lease or a record"): the
 * usual-case conditions and the "no batch" count are functions under sql/ that both paths use;
 * renewal, reclaim, the breaker and the id-by-id record belong to the general transactions.
 *
 * - step-calls.ts: the usual lease and record as one server-side call each; step-groups.ts:
 *   a process's lanes of one operation recording and leasing in one call
 * - sql/: those server-side functions, each in its file (its current definition)
 * - operation-lease.ts, operation-record.ts: the general transactions
 * - item-sql.ts: the statements on item and lease rows; record-misses.ts: ids not recorded
 * - operation-tail.ts: the last statement of a lease or a record
 */
export * from './operation-lease.ts';
export * from './operation-record.ts';
export * from './operation-throttle.ts';
export * from './worker-demand.ts';
