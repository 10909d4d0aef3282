/**
 * An opspad operation seen as an MCP Task (2025-11-25 revision): the task id is the operation id,
 * and everything a task reports is read from the operation, so there is no task state to keep in
 * step with it. Built from the operation tool's `get` answer.
 *
 * | operation                                   | task             |
 * |---------------------------------------------|------------------|
 * | active, paused                              | working          |
 * | awaiting_approval                           | input_required   |
 * | completed, at least one item completed      | completed        |
 * | completed, every item failed                | failed           |
 * | cancelled                                   | cancelled        |
 */
import type { CallToolResult, Task } from '@modelcontextprotocol/sdk/types.js';
import { OPERATION_TOOL } from './session.ts';

/** How often a client should ask again: a batch of a background operation takes about this long. */
export const TASK_POLL_INTERVAL_MS = 1000;

/** The fields of the `get` answer a task is made of. */
export interface OperationTaskSource {
  operation_id: string;
  status: string;
  total_items: number;
  completed_count: number;
  failed_count: number;
  remaining_count: number;
  created_at: string;
  updated_at: string;
  paused_reason?: string | null;
  failure_reasons?: { reason: string | null; count: number; examples: string[] }[];
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The `get` answer's task fields, or null when `body` is not a `get` answer. */
export function operationTaskSource(body: unknown): OperationTaskSource | null {
  if (!isRecord(body)) {
    return null;
  }
  const { operation_id: id, status, created_at: created, updated_at: updated } = body;
  const numbers = ['total_items', 'completed_count', 'failed_count', 'remaining_count'] as const;
  if (
    typeof id !== 'string' ||
    typeof status !== 'string' ||
    typeof created !== 'string' ||
    typeof updated !== 'string' ||
    numbers.some((key) => typeof body[key] !== 'number')
  ) {
    return null;
  }
  return body as unknown as OperationTaskSource;
}

function taskStatusOf(source: OperationTaskSource): Task['status'] {
  switch (source.status) {
    case 'completed':
      return source.completed_count === 0 && source.failed_count > 0 ? 'failed' : 'completed';
    case 'cancelled':
      return 'cancelled';
    case 'awaiting_approval':
      return 'input_required';
    default:
      return 'working';
  }
}

function countsLine(source: OperationTaskSource): string {
  return `${source.completed_count + source.failed_count}/${source.total_items} done: ${source.completed_count} completed, ${source.failed_count} failed, ${source.remaining_count} remaining`;
}

function statusMessageOf(source: OperationTaskSource): string {
  const counts = countsLine(source);
  switch (source.status) {
    case 'paused':
      return `Paused${source.paused_reason ? ` (${source.paused_reason})` : ''}; ${counts}.`;
    case 'awaiting_approval':
      return `Awaits the user's approval before it starts; ${counts}.`;
    default:
      return `${source.status[0]?.toUpperCase()}${source.status.slice(1)}; ${counts}.`;
  }
}

export function operationTask(source: OperationTaskSource): Task {
  return {
    taskId: source.operation_id,
    status: taskStatusOf(source),
    // The operation outlives the task protocol's clocks: opspad's retention decides.
    ttl: null,
    createdAt: source.created_at,
    lastUpdatedAt: source.updated_at,
    pollInterval: TASK_POLL_INTERVAL_MS,
    statusMessage: statusMessageOf(source),
  };
}

/**
 * `tasks/result` of an operation: its counts, its failures grouped by reason, and the call that
 * retries them when some failed.
 */
export function operationTaskResult(source: OperationTaskSource): CallToolResult {
  const next =
    source.failed_count > 0
      ? {
          next: `To retry the ${source.failed_count} failed items: ${OPERATION_TOOL} ${JSON.stringify({ action: 'retry_failed', operation_id: source.operation_id })}`,
        }
      : {};
  const structured = {
    operation_id: source.operation_id,
    status: source.status,
    total_items: source.total_items,
    completed_count: source.completed_count,
    failed_count: source.failed_count,
    remaining_count: source.remaining_count,
    failure_reasons: source.failure_reasons ?? [],
    ...next,
  };
  return { content: [{ type: 'text', text: JSON.stringify(structured) }], structuredContent: structured };
}
