/**
 * Renders the operations part of the context fragment: the compact block an assistant puts in
 * its system prompt every turn. It must fit a hard character budget whatever the number of
 * operations, so whole entries are added while they fit and the rest are summarized by count;
 * a line is never cut in the middle. The text has no clock times, so it only changes when the
 * work does (a cached prompt prefix before it survives).
 */
import { type ListedOperation, remainingOf } from './operation.ts';

export const OPERATIONS_BUDGET_CHARS = 2000;
const NOTES_PREVIEW_CHARS = 160;
const HEADER = '## Bulk operations (manage_assistant_operation)';

export interface OperationSummary {
  operation_id: string;
  operation_type: string;
  status: ListedOperation['status'];
  execution: string;
  total_items: number;
  completed_count: number;
  failed_count: number;
  remaining_count: number;
  in_flight_count: number;
  paused_reason: string | null;
}

export function summarizeOperation(op: ListedOperation, inFlight: number): OperationSummary {
  return {
    operation_id: op.id,
    operation_type: op.operation_type,
    status: op.status,
    execution: op.state_json.execution,
    total_items: op.total_items,
    completed_count: op.completed_count,
    failed_count: op.failed_count,
    remaining_count: remainingOf(op),
    in_flight_count: inFlight,
    paused_reason: op.status === 'paused' ? (op.state_json.paused_reason ?? null) : null,
  };
}

function oneLine(text: string, max: number): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
}

function entryLines(op: ListedOperation, summary: OperationSummary): string[] {
  const done = summary.completed_count + summary.failed_count;
  const counts = [
    `${done}/${summary.total_items} recorded`,
    `${summary.completed_count} completed`,
    `${summary.failed_count} failed`,
    `${summary.remaining_count} remaining`,
  ];
  if (summary.in_flight_count > 0) {
    counts.push(`${summary.in_flight_count} in flight`);
  }
  const lines = [`- ${op.status.toUpperCase()} ${op.operation_type} (operation_id ${op.id}): ${counts.join(', ')}.`];
  if (op.status === 'active') {
    lines.push(
      op.state_json.execution === 'background'
        ? '  Workers are processing it; check with {"action":"get"}.'
        : summary.remaining_count > 0
          ? '  Next: {"action":"progress"} for the next batch, process it, then {"action":"update"}.'
          : `  Every item is recorded: {"action":"complete","operation_id":"${op.id}"}.`,
    );
  } else {
    const why = summary.paused_reason ? ` (paused: ${oneLine(summary.paused_reason, 120)})` : '';
    lines.push(`  To continue${why}: {"action":"resume","operation_id":"${op.id}"}.`);
  }
  if (op.state_json.notes) {
    lines.push(`  Notes: ${oneLine(op.state_json.notes, NOTES_PREVIEW_CHARS)}`);
  }
  return lines;
}

export interface RenderedOperations {
  text: string;
  shown: OperationSummary[];
}

/**
 * Renders `operations` (active first, then most recently touched) within `budget` characters.
 * `total` counts every open operation, including those the caller did not load.
 */
export function renderOperations(
  operations: readonly (ListedOperation & { in_flight_count: number })[],
  total: number,
  budget = OPERATIONS_BUDGET_CHARS,
): RenderedOperations {
  if (total === 0) {
    return { text: '', shown: [] };
  }
  const overflowLine = (hidden: number) =>
    `- …and ${hidden} more paused operation${hidden === 1 ? '' : 's'} not shown; resume one by id, or cancel those no longer needed.`;
  // Room kept for the overflow line, sized for the largest count it could show.
  const reserve = overflowLine(total).length + 1;
  const lines = [HEADER];
  let length = HEADER.length;
  const shown: OperationSummary[] = [];
  // The active operation matters most: it goes first even if the caller's order differs, so
  // it is never the one hidden in the overflow line (which speaks of paused operations).
  const ordered = [...operations].sort((a, b) => Number(b.status === 'active') - Number(a.status === 'active'));
  for (const op of ordered) {
    const summary = summarizeOperation(op, op.in_flight_count);
    const entry = entryLines(op, summary);
    const entryLength = entry.reduce((sum, line) => sum + line.length + 1, 0);
    const isLast = shown.length + 1 === total;
    if (length + entryLength + (isLast ? 0 : reserve) > budget) {
      break;
    }
    lines.push(...entry);
    length += entryLength;
    shown.push(summary);
  }
  if (shown.length < total) {
    lines.push(overflowLine(total - shown.length));
  }
  return { text: lines.join('\n'), shown };
}
