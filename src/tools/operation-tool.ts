/**
 * `manage_assistant_operation`: the LLM-facing tool over the operation store. Parses the
 * action with the domain's zod schema, applies the rules no schema can express (counts, unique
 * ids, limits), calls the store and shapes a response a model can act on.
 */
import { AppError } from '../domain/errors.ts';
import { throttledAdvice } from '../domain/key-limits.ts';
import {
  ASSISTANT_OWNER,
  type ExecutionMode,
  type OperationCounts,
  type OperationRecord,
} from '../domain/operation.ts';
import {
  type CreateInput,
  checkCreateSizes,
  type GetInput,
  OPERATION_DEFAULTS,
  OperationToolInput,
  type RetryFailedInput,
} from '../domain/operation-input.ts';
import { AWAITING_APPROVAL_ADVICE } from '../domain/operation-lifecycle.ts';
import {
  legacyPausedBy,
  type PausedBy,
  parsePausedBy,
  pausedAdvice,
  pauseReasonOf,
  pauserOfActor,
} from '../domain/paused-by.ts';
import { ITEMS_PRUNED_NOTE, itemsArePruned, itemsPrunedOutput } from '../domain/retention.ts';
import { DEFAULT_SIZE_LIMITS } from '../domain/size-limits.ts';
import { findDuplicates, parseOrThrow } from '../domain/validation.ts';
import {
  type ConversationScope,
  type CreateOperationParams,
  cancelOperation,
  completeOperation,
  createOperation,
  failureGroups,
  getOperation,
  isUniqueViolation,
  lastPauseActors,
  leaseBatch,
  pauseOperation,
  recordResults,
  resumeOperation,
  retryFailed,
  throttlesOf,
  UNIQUE_INDEX,
} from '../store/index.ts';
import type { OperationToolDeps } from './operation-tool-deps.ts';

export const OPERATION_TOOL_NAME = 'manage_assistant_operation';

export type { OperationToolDeps };

export interface ToolCallContext {
  scope: ConversationScope;
  /** Who is calling, for the audit trail (e.g. `api_key:<id>`). */
  actor: string;
  /** The execution named by the `X-Opspad-Execution` header, if any (scopes notes). */
  executionId?: string;
  /** More for the data of the audit event a pause, resume, cancel or retry writes (a bulk action's id). */
  eventData?: Record<string, unknown>;
  /** A resume refuses (conflict) while another operation of the conversation is active (a bulk resume). */
  resumeOnlyIfNoneActive?: boolean;
}

/** The JSON a tool call answers with. */
export type ToolResult = Record<string, unknown>;

function checkCreate(count: number, totalItems: number, maxItems: number): void {
  if (count > maxItems) {
    throw new AppError(
      'too_many_items',
      `item_ids has ${count} ids; one operation holds at most ${maxItems} (OPSPAD_MAX_ITEMS). Split the work into several operations.`,
      { field: 'item_ids', count, max_items: maxItems },
    );
  }
  if (totalItems !== count) {
    throw new AppError(
      'validation_failed',
      `Invalid input: total_items: is ${totalItems} but item_ids holds ${count} ids; they must be equal.`,
      {
        issues: [{ field: 'total_items', message: `must equal item_ids.length (${count})` }],
      },
    );
  }
}

/** The repeated ids of a create, as an error that names them; null when there are none. */
function duplicateIdsError(itemIds: readonly string[]): AppError | null {
  const duplicates = findDuplicates(itemIds, 21);
  return duplicates.length === 0 ? null : repeatedIdsError(duplicates);
}

/** The error naming a create's repeated ids (the first 20, in order of their first repeat). */
export function repeatedIdsError(duplicates: readonly string[]): AppError {
  const shown = duplicates.slice(0, 20).map((id) => JSON.stringify(id));
  return new AppError(
    'duplicate_item_ids',
    `Invalid input: item_ids: each id must appear once; repeated: ${shown.join(', ')}${duplicates.length > 20 ? ' and more' : ''}.`,
    { field: 'item_ids', duplicate_ids: duplicates.slice(0, 20) },
  );
}

/** Whether `error` is the unique index on (operation_id, item_id) refusing a repeated id. */
function isDuplicateItemError(error: unknown): boolean {
  return isUniqueViolation(error, UNIQUE_INDEX.itemId);
}

/** `{[key]: value}`, or nothing when value is undefined (the field is then left out). */
function optional<T>(key: string, value: T | undefined): Record<string, T> {
  return value === undefined ? {} : { [key]: value };
}

function operationSummary(op: OperationRecord) {
  return {
    operation_id: op.id,
    status: op.status,
    operation_type: op.operation_type,
  };
}

/** Who paused `op` (null while it is not paused), reading the audit trail for older pauses. */
async function pausedByOf(
  deps: OperationToolDeps,
  ctx: ToolCallContext,
  op: OperationRecord,
): Promise<PausedBy | null> {
  if (op.status !== 'paused') {
    return null;
  }
  let stored = op.state_json.paused_by;
  if (stored === undefined) {
    const actors = await lastPauseActors(deps.db, ctx.scope.organizationId, [op.id]);
    stored = legacyPausedBy(op.state_json.paused_reason, actors.get(op.id));
  }
  return parsePausedBy(stored) ?? null;
}

function nextStep(
  op: OperationRecord,
  counts: OperationCounts,
  batch: readonly string[],
  pausedBy: PausedBy | null,
): string {
  if (op.status === 'paused') {
    return `The operation is paused. ${pausedAdvice(pausedBy ?? undefined, op.id, op.state_json.paused_reason)}`;
  }
  if (op.status === 'awaiting_approval') {
    return AWAITING_APPROVAL_ADVICE;
  }
  if (op.status !== 'active') {
    return itemsArePruned(op.state_json)
      ? `The operation is ${op.status}. ${ITEMS_PRUNED_NOTE}`
      : `The operation is ${op.status}.`;
  }
  if (batch.length > 0) {
    return `Process these items, then report them with {"action":"update","operation_id":"${op.id}", completed_ids, failed}.`;
  }
  if (counts.remaining_count === 0) {
    return `Every item is recorded. Call {"action":"complete","operation_id":"${op.id}"}.`;
  }
  return `No batch is free right now: ${counts.in_flight_count} items are being processed by workers.`;
}

/** What a create's checks need to know of its ids: all of them, or what was counted as they streamed. */
export type CreateIdsSummary =
  | { itemIds: readonly string[] }
  | { count: number; firstLong: { index: number; length: number } | null };

/**
 * The checks of a create beyond its schema (count, sizes, execution, the handler's checks of
 * query_params), in the order every create runs them, and the store's parameters. Throws the
 * {@link AppError} the call answers with.
 */
export function prepareCreate(
  deps: OperationToolDeps,
  ctx: ToolCallContext,
  input: Omit<CreateInput, 'item_ids'>,
  ids: CreateIdsSummary,
): Omit<CreateOperationParams, 'itemIds'> {
  const count = 'itemIds' in ids ? ids.itemIds.length : ids.count;
  checkCreate(count, input.total_items, deps.maxItems);
  checkCreateSizes(
    { ...input, item_ids: 'itemIds' in ids ? ids.itemIds : undefined },
    deps.sizeLimits ?? DEFAULT_SIZE_LIMITS,
    'itemIds' in ids ? null : ids.firstLong,
  );
  const execution: ExecutionMode =
    input.execution ?? (deps.hasHandler(input.operation_type) ? 'background' : 'assistant');
  if (execution === 'background' && !deps.hasHandler(input.operation_type)) {
    throw new AppError(
      'validation_failed',
      `Invalid input: execution: no worker handles operation_type "${input.operation_type}", so it cannot run in the background. Use "execution": "assistant" and process the batches yourself.`,
      { issues: [{ field: 'execution', message: 'no worker handler for this operation_type' }] },
    );
  }
  const issues =
    execution === 'background' ? (deps.checkQueryParams?.(input.operation_type, input.query_params ?? {}) ?? []) : [];
  if (issues.length > 0) {
    throw new AppError(
      'validation_failed',
      `Invalid input: ${issues.map((i) => `${i.field}: ${i.message}`).join('; ')}`,
      {
        issues,
      },
    );
  }
  return {
    operationType: input.operation_type,
    batchSize: input.batch_size ?? OPERATION_DEFAULTS.batchSize,
    queryParams: input.query_params ?? null,
    notes: input.notes ?? null,
    execution,
    maxParallelBatches: input.max_parallel_batches ?? OPERATION_DEFAULTS.maxParallelBatches,
    maxFailureRate: input.max_failure_rate ?? null,
    maxActiveBackground: deps.maxActiveBackground,
    quota: deps.quota,
    queuePrefix: deps.queuePrefix,
    actor: ctx.actor,
  };
}

async function create(deps: OperationToolDeps, ctx: ToolCallContext, input: CreateInput): Promise<ToolResult> {
  const params = prepareCreate(deps, ctx, input, { itemIds: input.item_ids });
  // Repeated ids are found by the unique index on (operation_id, item_id) as the rows go in,
  // which rolls the create back: a pass over the ids in JavaScript before inserting cost 0.35 s
  // of a 1,000,000-id create for nothing (npm run bench). Naming them takes that pass, only then.
  const { operation, pausedOperationId } = await createOperation(deps.db, ctx.scope, {
    ...params,
    itemIds: input.item_ids,
  }).catch((error: unknown) => {
    throw (isDuplicateItemError(error) && duplicateIdsError(input.item_ids)) || error;
  });
  await deps.onActivated?.(operation);
  return createdResponse(operation, pausedOperationId);
}

/** What create and retry_failed answer about the operation they made. */
export function createdResponse(operation: OperationRecord, pausedOperationId: string | null, extra: ToolResult = {}) {
  return {
    operation_id: operation.id,
    status: operation.status,
    operation_type: operation.operation_type,
    total_items: operation.total_items,
    batch_size: operation.state_json.batch_size,
    execution: operation.state_json.execution,
    ...extra,
    paused_operation_id: pausedOperationId,
  };
}

const failureReasons = async (deps: OperationToolDeps, operationId: string) =>
  (await failureGroups(deps.db, operationId, { limit: 10, offset: 0 })).groups;

async function get(deps: OperationToolDeps, ctx: ToolCallContext, input: GetInput): Promise<ToolResult> {
  const details = await getOperation(deps.db, ctx.scope, input.operation_id, {
    after: input.failures_cursor ? Number(input.failures_cursor) : -1,
    limit: input.failures_limit ?? OPERATION_DEFAULTS.failuresPageSize,
  });
  const op = details.operation;
  const pausedBy = await pausedByOf(deps, ctx, op);
  const throttled =
    op.status === 'active' && op.state_json.execution === 'background'
      ? (await throttlesOf(deps.db, ctx.scope, [op.id])).get(op.id)
      : undefined;
  return {
    ...operationSummary(op),
    batch_size: op.state_json.batch_size,
    execution: op.state_json.execution,
    cursor: op.state_json.cursor,
    ...details.counts,
    abandoned_count: op.state_json.abandoned_count,
    query_params: op.state_json.query_params,
    notes: op.state_json.notes,
    retry_of: op.state_json.retry_of ?? null,
    paused_reason: op.status === 'paused' ? (op.state_json.paused_reason ?? null) : null,
    paused_by: pausedBy,
    ...(throttled ? { throttled, next: throttledAdvice(throttled) } : {}),
    ...(pausedBy ? { next: pausedAdvice(pausedBy, op.id, op.state_json.paused_reason) } : {}),
    ...(op.status === 'awaiting_approval' ? { next: AWAITING_APPROVAL_ADVICE } : {}),
    created_at: op.created_at.toISOString(),
    updated_at: op.updated_at.toISOString(),
    failures: details.failures.map((f) => ({ id: f.item_id, reason: f.reason })),
    next_failures_cursor: details.nextFailuresCursor,
    // Grouped by reason (the ten most frequent): what a model, or an MCP task's result, acts on.
    ...optional('failure_reasons', op.failed_count > 0 ? await failureReasons(deps, op.id) : undefined),
    ...optional('items_pruned', itemsPrunedOutput(op.state_json, op.failed_count)),
  };
}

async function retry(deps: OperationToolDeps, ctx: ToolCallContext, input: RetryFailedInput): Promise<ToolResult> {
  const { operation, pausedOperationId } = await retryFailed(deps.db, ctx.scope, input.operation_id, {
    batchSize: input.batch_size ?? null,
    actor: ctx.actor,
    maxActiveBackground: deps.maxActiveBackground,
    quota: deps.quota,
    eventData: ctx.eventData,
  });
  await deps.onActivated?.(operation);
  return createdResponse(operation, pausedOperationId, { retry_of: input.operation_id });
}

/** Runs one call of the operation tool; throws {@link AppError} for anything it refuses. */
export async function executeOperationTool(
  deps: OperationToolDeps,
  ctx: ToolCallContext,
  rawInput: unknown,
): Promise<ToolResult> {
  const input = parseOrThrow(OperationToolInput, rawInput, `${OPERATION_TOOL_NAME} input`);
  switch (input.action) {
    case 'create':
      return create(deps, ctx, input);
    case 'progress': {
      const { operation, batch, counts } = await leaseBatch(deps.db, ctx.scope, {
        operationId: input.operation_id,
        owner: input.lease_owner ?? ASSISTANT_OWNER,
        leaseSeconds: input.lease_seconds ?? OPERATION_DEFAULTS.leaseSeconds,
      });
      return {
        ...operationSummary(operation),
        batch,
        cursor: operation.state_json.cursor,
        ...counts,
        next: nextStep(operation, counts, batch, await pausedByOf(deps, ctx, operation)),
      };
    }
    case 'update': {
      const result = await recordResults(deps.db, ctx.scope, {
        operationId: input.operation_id,
        completedIds: input.completed_ids ?? [],
        failed: input.failed ?? [],
        owner: input.lease_owner ?? ASSISTANT_OWNER,
      });
      return {
        ...operationSummary(result.operation),
        ...result.counts,
        already_recorded: result.alreadyRecorded,
        lease_conflicts: result.leaseConflicts,
      };
    }
    case 'complete': {
      const { operation, counts, abandoned } = await completeOperation(deps.db, ctx.scope, input.operation_id, {
        force: input.force ?? false,
        actor: ctx.actor,
      });
      return { ...operationSummary(operation), ...counts, abandoned_count: abandoned };
    }
    case 'cancel': {
      const { operation, counts } = await cancelOperation(deps.db, ctx.scope, input.operation_id, {
        actor: ctx.actor,
        eventData: ctx.eventData,
      });
      await deps.onStopped?.(operation, 'cancelled');
      return {
        ...operationSummary(operation),
        total_items: counts.total_items,
        completed_count: counts.completed_count,
        failed_count: counts.failed_count,
        abandoned_count: operation.state_json.abandoned_count,
      };
    }
    case 'pause': {
      const pausedBy = pauserOfActor(ctx.actor);
      const { operation, counts } = await pauseOperation(deps.db, ctx.scope, input.operation_id, {
        actor: ctx.actor,
        reason: pauseReasonOf(pausedBy),
        pausedBy,
        eventData: ctx.eventData,
      });
      await deps.onStopped?.(operation, 'paused');
      return {
        ...operationSummary(operation),
        ...counts,
        paused_by: parsePausedBy(operation.state_json.paused_by) ?? null,
      };
    }
    case 'resume': {
      const { operation, counts, pausedOperationId } = await resumeOperation(deps.db, ctx.scope, input.operation_id, {
        actor: ctx.actor,
        maxActiveBackground: deps.maxActiveBackground,
        eventData: ctx.eventData,
        onlyIfNoneActive: ctx.resumeOnlyIfNoneActive,
      });
      await deps.onActivated?.(operation);
      return { ...operationSummary(operation), ...counts, paused_operation_id: pausedOperationId };
    }
    case 'get':
      return get(deps, ctx, input);
    case 'retry_failed':
      return retry(deps, ctx, input);
  }
}
