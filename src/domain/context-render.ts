/**
 * The operations part of the context fragment: one short entry per open operation, priced in
 * tokens because it is paid on every turn. Each entry names the operation by a short alias
 * (`#1`, `#2`: facts that cite `operation:<id>` use it too), spells its 36-character id once
 * (36 characters, 35 o200k tokens: the most expensive thing in it), names the next action — the
 * heading says once how to call it — and says who paused it. The text has no clock times,
 * so it only changes when the work does (a cached prompt prefix before it survives).
 */
import { type OperationThrottle, throttleWords } from './key-limits.ts';
import type { ListedOperation } from './operation.ts';
import { type ProgressFields, progressFields } from './operation-progress.ts';
import { pausedByWords } from './paused-by.ts';

const NOTES_PREVIEW_CHARS = 120;
const REASON_PREVIEW_CHARS = 100;

export interface OperationSummary extends ProgressFields {
  operation_id: string;
  /** The operation's alias in the text (`#1`), or null when it is not shown. */
  alias: string | null;
  /** Set when the operation lives in another conversation than the one asked about. */
  conversation_id?: string;
  /** Set while its work waits on (or runs at the pace of) a provider limit. */
  throttled?: OperationThrottle;
}

/** An open operation as the fragment reads it: the listed record and its leased items. */
export type OpenOperation = ListedOperation & { in_flight_count: number };

export function summarizeOperation(
  op: OpenOperation,
  alias: string | null,
  pausedBy?: string,
  throttled?: OperationThrottle,
): OperationSummary {
  return {
    operation_id: op.id,
    alias,
    ...progressFields(op, op.in_flight_count, pausedBy),
    ...(throttled && op.status === 'active' ? { throttled } : {}),
  };
}

/** Tenant text on one line, cut at a word where it must be (never mid-line in the fragment). */
export function oneLine(text: string, max: number): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length > max ? `${flat.slice(0, max - 1).trimEnd()}…` : flat;
}

/** What to do next, as the action to call with the entry's operation_id. */
function nextOf(op: OpenOperation, summary: OperationSummary): string {
  if (op.status === 'active') {
    if (summary.execution === 'background') {
      return summary.throttled
        ? `workers run it at its provider's limit (${throttleWords(summary.throttled)}): throttled, not stalled; get to check on it`
        : 'workers run it; get to check on it';
    }
    return summary.remaining_count > 0 ? 'progress, do the batch, update' : 'every item is recorded: complete';
  }
  if (op.status === 'awaiting_approval') {
    return "awaits the user's approval before it starts (an operator or the user approves it); tell the user, get to check on it";
  }
  const by = summary.paused_by;
  switch (by?.kind) {
    case 'operator':
      return `paused by operator ${oneLine(by.name ?? '', 40)}: ask the user before resume`;
    case 'circuit_breaker': {
      const why = (summary.paused_reason ?? '').replace(/^circuit breaker: /, '').split(' (')[0] ?? '';
      return `paused by the circuit breaker (${oneLine(why, REASON_PREVIEW_CHARS)}): get the failures, fix the cause, then resume`;
    }
    default:
      return `paused by ${pausedByWords(by ?? undefined)}; resume to continue`;
  }
}

/**
 * The lines of one operation's entry: alias, status, type, counts, the id once, and the next
 * action (called as manage_assistant_operation with that action and this operation_id).
 */
export function entryLines(op: OpenOperation, summary: OperationSummary): string[] {
  const done = summary.completed_count + summary.failed_count;
  const extra: string[] = [];
  if (summary.failed_count > 0) {
    extra.push(`${summary.failed_count} failed`);
  }
  if (summary.in_flight_count > 0) {
    extra.push(`${summary.in_flight_count} in flight`);
  }
  const counts = `${done}/${summary.total_items} done${extra.length > 0 ? ` (${extra.join(', ')})` : ''}`;
  const lines = [
    `- ${summary.alias ?? '-'} ${op.status.toUpperCase()} ${oneLine(op.operation_type, 64)}, ${counts}, id ${op.id}: ${nextOf(op, summary)}.`,
  ];
  if (op.state_json.notes) {
    lines.push(`  Notes: ${oneLine(op.state_json.notes, NOTES_PREVIEW_CHARS)}`);
  }
  return lines;
}

/** The line that counts the operations left out, with what to do about them. */
export function overflowLine(hidden: number): string {
  return `- …and ${hidden} more open operation${hidden === 1 ? '' : 's'} not shown: get one by id, or cancel those no longer needed.`;
}

/** Active first, then most recently touched: a stable order, so the text is too. */
export function orderOperations<T extends OpenOperation>(operations: readonly T[]): T[] {
  return [...operations].sort((a, b) => Number(b.status === 'active') - Number(a.status === 'active'));
}
