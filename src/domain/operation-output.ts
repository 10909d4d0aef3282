/**
 * What the operation surfaces answer: each action of `manage_assistant_operation`, an
 * operation's status (`GET /v1/operations/:id`) and the frames of its event stream. These zod
 * schemas are the one description of those bodies: the OpenAPI document is generated from them
 * and `opspad/client` takes its result types from them (`z.output`), so neither can drift from
 * the other; a test validates real answers against the document.
 */
import { z } from 'zod';
import { OPERATION_STATUS } from './operation.ts';

const count = z.number().int().min(0);
const operationId = z.uuid().describe('The operation id.');

/** Who paused an operation (null unless it is paused); see domain/paused-by.ts. */
export const PausedByOutput = z
  .object({
    kind: z.enum(['assistant', 'operator', 'circuit_breaker', 'newer_operation', 'other']),
    name: z.string().optional().describe("The operator's user name (operator), the actor (other)."),
  })
  .nullable()
  .describe('Who paused it: after an operator’s pause, ask the user before resuming.');

/** Set while an operation's work waits on a provider limit of its handler (domain/key-limits.ts). */
export const ThrottledOutput = z
  .object({
    limit_key: z.string().nullable().describe("The handler's key it counts against (null: its organization's)."),
    limited_by: z.enum(['rate', 'concurrency']),
    rate: z.object({ max: count, interval_ms: count }).nullable().describe('Items per interval for the key.'),
    concurrency: count.nullable().describe('Items of the key in flight at once.'),
    until: z.iso.datetime().describe('Until when it is expected to wait; renewed while it does.'),
  })
  .describe(
    'Present while workers run the operation at its provider’s limit: throttled, not stalled; do not resume it.',
  );

export const OperationStatus = z.enum(OPERATION_STATUS);
export const ExecutionMode = z
  .enum(['assistant', 'background'])
  .describe('"assistant": the caller processes the batches; "background": workers do.');

/** How far an operation is; the same numbers on every surface. */
export const OperationCounts = {
  total_items: count,
  completed_count: count,
  failed_count: count,
  remaining_count: count.describe('Items not recorded yet: pending plus in flight.'),
  in_flight_count: count.describe('Items leased to a worker or the assistant and not recorded yet.'),
};

const summary = {
  operation_id: operationId,
  status: OperationStatus,
  operation_type: z.string(),
};

export const CreateResult = z.object({
  ...summary,
  total_items: count,
  batch_size: count,
  execution: ExecutionMode,
  paused_operation_id: z.uuid().nullable().describe('The operation this create paused, if one was active.'),
});

export const ProgressResult = z.object({
  ...summary,
  batch: z.array(z.string()).describe('The items leased to you: process them, then report them with update.'),
  cursor: count,
  ...OperationCounts,
  next: z.string().describe('What to call next, in words a model follows.'),
});

export const UpdateResult = z.object({
  ...summary,
  ...OperationCounts,
  already_recorded: z.array(z.string()).describe('Ids recorded before this call: ignored, counted once.'),
  lease_conflicts: z.array(z.string()).describe('Ids leased to someone else: not recorded by this call.'),
});

export const CompleteResult = z.object({ ...summary, ...OperationCounts, abandoned_count: count });

export const PauseResult = z.object({ ...summary, ...OperationCounts, paused_by: PausedByOutput });

export const ResumeResult = z.object({
  ...summary,
  ...OperationCounts,
  paused_operation_id: z.uuid().nullable(),
});

export const CancelResult = z.object({
  ...summary,
  total_items: count,
  completed_count: count,
  failed_count: count,
  abandoned_count: count,
});

/** What retention deleted of a finished operation (docs/data-lifecycle.md). */
export const ItemsPruned = z
  .object({
    at: z.iso.datetime().nullable().describe('When the item rows were deleted; null while the deletion is under way.'),
    failures_kept: count.describe('Failed items still listed in failures, with their ids and reasons.'),
    failures_pruned: count.describe('Failed items whose rows were deleted: counted by reason below.'),
    pruned_failure_reasons: z
      .array(z.object({ reason: z.string(), count }))
      .describe('The reasons of the deleted failures, the most frequent first.'),
    other_pruned_failures: count.describe('Deleted failures with further reasons, not listed one by one.'),
  })
  .describe(
    'Items pruned: the item rows of this finished operation were deleted after the retention period (OPSPAD_RETENTION). Its counts stay exact; item-level data is limited to the failures kept.',
  );

export const GetResult = z.object({
  ...summary,
  batch_size: count,
  execution: ExecutionMode,
  cursor: count,
  ...OperationCounts,
  abandoned_count: count,
  query_params: z.record(z.string(), z.unknown()).nullable(),
  notes: z.string().nullable(),
  retry_of: z.uuid().nullable().describe('The operation this one retries the failures of.'),
  paused_reason: z.string().nullable(),
  paused_by: PausedByOutput,
  throttled: ThrottledOutput.optional(),
  next: z.string().optional().describe('When paused or throttled: what to do, with the exact call.'),
  created_at: z.iso.datetime(),
  updated_at: z.iso.datetime(),
  failures: z.array(z.object({ id: z.string(), reason: z.string().nullable() })),
  next_failures_cursor: z.string().nullable().describe('Pass as failures_cursor for the next page; null at the end.'),
  failure_reasons: z
    .array(
      z.object({
        reason: z.string().nullable(),
        count,
        examples: z.array(z.string()).describe('The first item ids that failed with this reason.'),
      }),
    )
    .optional()
    .describe('When items failed: the failures grouped by reason, the most frequent first (at most 10 reasons).'),
  items_pruned: ItemsPruned.optional(),
});

export const RetryFailedResult = CreateResult.extend({ retry_of: operationId });

/** The answer of each action, by action. */
export const OPERATION_RESULTS = {
  create: CreateResult,
  progress: ProgressResult,
  update: UpdateResult,
  complete: CompleteResult,
  pause: PauseResult,
  resume: ResumeResult,
  cancel: CancelResult,
  get: GetResult,
  retry_failed: RetryFailedResult,
} as const;

export const OperationToolResult = z.union(Object.values(OPERATION_RESULTS));

/** `GET /v1/operations/:id`, and the data of `progress` and `end` stream events. */
export const OperationProgress = z.object({
  operation_id: operationId,
  status: OperationStatus,
  operation_type: z.string(),
  conversation_id: z.uuid(),
  execution: ExecutionMode,
  paused_reason: z.string().nullable().describe('Why the operation is paused (null unless paused).'),
  paused_by: PausedByOutput,
  ...OperationCounts,
});

/** `GET /v1/conversations/:id/operations`: one page of a conversation's operations, newest first. */
export const ConversationOperationsPage = z.object({
  operations: z.array(OperationProgress.extend({ created_at: z.iso.datetime(), updated_at: z.iso.datetime() })),
  next_before: operationId
    .nullable()
    .describe('Pass as `before` for the next (older) page; null when this page is the last.'),
});

/** The data of an audit-trail event on the stream (`batch_recorded`, `paused`, …). */
export const OperationAuditEvent = z
  .object({
    actor: z.string().describe('Who did it: api_key:<id>, operator:<user>, a worker job, or opspad.'),
    at: z.iso.datetime(),
  })
  .catchall(z.unknown())
  .describe("The event's own fields follow actor and at (e.g. completed and failed ids of batch_recorded).");

/** Kinds of audit-trail events an operation's stream may carry, besides progress and end. */
export const OPERATION_EVENT_KINDS = [
  'created',
  'batch_leased',
  'batch_recorded',
  'lease_expired',
  'paused',
  'resumed',
  'completed',
  'cancelled',
  'expired',
  'retried',
  'approved',
  'rejected',
] as const;

export type CreateResult = z.output<typeof CreateResult>;
export type ProgressResult = z.output<typeof ProgressResult>;
export type UpdateResult = z.output<typeof UpdateResult>;
export type CompleteResult = z.output<typeof CompleteResult>;
export type PauseResult = z.output<typeof PauseResult>;
export type ResumeResult = z.output<typeof ResumeResult>;
export type CancelResult = z.output<typeof CancelResult>;
export type GetResult = z.output<typeof GetResult>;
export type ItemsPruned = z.output<typeof ItemsPruned>;
export type RetryFailedResult = z.output<typeof RetryFailedResult>;
export type OperationProgress = z.output<typeof OperationProgress>;
export type ConversationOperationsPage = z.output<typeof ConversationOperationsPage>;
export type OperationAuditEvent = z.output<typeof OperationAuditEvent>;
