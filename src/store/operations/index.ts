/**
 * Operations and their items: every action of the operation tool but the lease and the record
 * (those are leases/), each as one transaction, one module per statement family; the audit
 * trail; the reads of the context fragment, the operator view and an organization's open work.
 *
 * Tables: assistant_operation, assistant_operation_item (written here when created, copied for
 * `retry_failed`; leases/ records them), assistant_operation_kept_failure (read here, written by
 * retention/), operation_event.
 *
 * Lock order, for every transaction that changes an operation (operation-row.ts): the
 * conversation (create, resume, retry_failed) → the operation row → advisory locks (the
 * organization's background capacity, the circuit breaker) → item rows → the operation row's
 * update, last. Reads take no lock: each is one snapshot.
 *
 * - operation-row.ts: finding, locking (shared or exclusive) and writing the operation row
 * - operation-admission.ts: pausing the active operation, the organization's background limit
 * - operation-quota.ts: the organization's quota of stored items and open operations
 * - admission-refusals.ts: the answers to the quota's and the limit's refusals
 * - operation-create.ts: `create` (items through item-insert.ts, or streamed: item-copy.ts)
 * - operation-retry.ts: `retry_failed`
 * - operation-control.ts: pause, resume, complete, cancel (the lifecycle in domain/operation-lifecycle.ts)
 * - operation-reads.ts, failure-sql.ts: `get`, open operations, an operation's failures
 * - conversation-operations.ts: a conversation's operations, finished ones included, paged
 * - item-results-sql.ts: the results file, a keyset page of items at a time
 * - context-reads.ts: what the context fragment reads each turn, in one statement
 * - operator-view-repo.ts, organization-operations-repo.ts: reads across conversations
 * - operator-filter.ts: the operator's filter, shared by the view and bulk actions
 * - operation-maintenance.ts: the reconciler's and the sweeper's cross-organization work
 * - event-repo.ts: the audit trail
 * - bulk-actions.ts: an operator's action on every operation a filter matches, and its progress
 * - sql/: the create and its admission (quota, pause, background limit, approval rule) as
 *   server-side functions, and the trigger function that deletes a deleted operation's items
 */
export * from './bulk-actions.ts';
export * from './context-reads.ts';
export * from './conversation-operations.ts';
export * from './event-repo.ts';
export { type FailureRow, failuresPage } from './failure-sql.ts';
export { createOperationFromStream, type ItemSink, RepeatedItemIdError } from './item-copy.ts';
export { type ItemResultRow, itemResultsPage, type ResultsPage } from './item-results-sql.ts';
export * from './operation-approval.ts';
export * from './operation-control.ts';
export * from './operation-create.ts';
export * from './operation-maintenance.ts';
export * from './operation-quota.ts';
export * from './operation-reads.ts';
export * from './operation-retry.ts';
export * from './operator-filter.ts';
export * from './operator-view-repo.ts';
export * from './organization-operations-repo.ts';
