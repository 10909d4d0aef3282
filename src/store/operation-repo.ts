/**
 * Operations: every action of the operation tool as one transaction, one module per statement
 * family. Each module's header states its lock order and its cost:
 *
 * - operation-row.ts: finding, locking (shared or exclusive) and writing the operation row
 * - operation-admission.ts: pausing the active operation, the organization's background limit
 * - operation-create.ts: `create` (the items go in through item-insert.ts insertItems)
 * - operation-retry.ts: `retry_failed`
 * - operation-lease.ts: `progress` (the lease), renew, extend, release, reclaim
 * - operation-record.ts: `update` (record-misses.ts says why ids were not recorded)
 * - operation-control.ts: pause, resume, complete, cancel (the lifecycle in domain/operation-lifecycle.ts)
 * - operation-reads.ts: get, open operations (the operator view's reads: operator-view-repo.ts)
 * - operation-maintenance.ts: the reconciler's and the sweeper's cross-organization work
 */
export * from './operation-control.ts';
export * from './operation-create.ts';
export * from './operation-lease.ts';
export * from './operation-maintenance.ts';
export * from './operation-reads.ts';
export * from './operation-record.ts';
export * from './operation-retry.ts';
