/**
 * Retention: deletes what its policy says is past keeping — finished operations' item rows and
 * events (keeping their failures in assistant_operation_kept_failure), ended executions' notes
 * and traces, pads' older versions, old context renders — in short bounded steps, so it never
 * stands in the way of live work. The reconciler runs it, one process at a time.
 *
 * Tables: retention_watermark (its own: where each age-pruned table's scan stopped); it deletes
 * from the tables of operations/ and scratchpads/ and writes assistant_operation_kept_failure.
 *
 * Lock order: each step locks one finished operation's row (FOR NO KEY UPDATE, with its status in
 * the condition, so a live operation is never touched) → the rows it deletes; nothing is held
 * between steps.
 */
export * from './retention.ts';
