/**
 * One operation as a table row of the operator view. The page and its live updates render rows
 * with this same function, so a row the stream replaces is exactly the row a reload would show,
 * escaped the same way.
 */
import { isFinished } from '../../domain/operation.ts';
import { formatDuration, formatRate, paceOf } from '../../domain/operation-pace.ts';
import { parsePausedBy, pauseReasonOf } from '../../domain/paused-by.ts';
import type { OperatorOperationRow } from '../../store/index.ts';
import { count, escapeHtml, OPERATIONS_PAGE_PATH, text, time } from './html.ts';

export const ROW_HEADERS = [
  'Operation',
  'Organization · conversation',
  'Status',
  'Progress',
  'Pace',
  'Last failure',
  '',
];

export function remainingOfRow(op: OperatorOperationRow): number {
  return Math.max(0, op.total_items - op.completed_count - op.failed_count - op.abandoned_count);
}

function progressBar(op: OperatorOperationRow): string {
  const total = Math.max(1, op.total_items);
  const width = (n: number) => ((n / total) * 100).toFixed(2);
  return `<div class="bar" title="${op.completed_count} completed, ${op.failed_count} failed, ${op.abandoned_count} abandoned of ${op.total_items}"><div class="ok" style="width:${width(op.completed_count)}%"></div><div class="ko" style="width:${width(op.failed_count)}%"></div><div class="ab" style="width:${width(op.abandoned_count)}%"></div></div>`;
}

function counts(op: OperatorOperationRow): string {
  const recorded = op.completed_count + op.failed_count;
  const parts = [
    `<span class="recorded">${count(recorded)}</span>/${count(op.total_items)} recorded`,
    `<span class="completed-count">${count(op.completed_count)}</span> completed`,
    `<span class="failed-count">${count(op.failed_count)}</span> failed`,
    ...(op.abandoned_count > 0 ? [`<span class="abandoned-count">${count(op.abandoned_count)}</span> abandoned`] : []),
    `${count(op.in_flight_count)} in flight`,
    `${count(remainingOfRow(op))} remaining`,
  ];
  return `<div class="muted counts">${parts.join(' · ')}</div>`;
}

function pausedBy(stored: string | null): string {
  const by = parsePausedBy(stored);
  if (!by) {
    return '';
  }
  const who: Record<typeof by.kind, string> = {
    assistant: 'the assistant',
    operator: `operator ${by.name ?? ''}`,
    circuit_breaker: 'the circuit breaker',
    newer_operation: 'a newer operation',
    other: by.name ?? 'someone',
  };
  return ` by ${text(who[by.kind], 80)}`;
}

function status(op: OperatorOperationRow): string {
  // A pause through the tool stores "paused by …" as its reason: said once is enough.
  const reason = op.paused_reason && op.paused_reason !== pauseReasonOf(op.paused_by ?? '') ? op.paused_reason : null;
  const paused =
    op.status === 'paused'
      ? `<div class="muted paused-by">paused${pausedBy(op.paused_by)}</div>${reason ? `<div class="paused-reason">${text(reason, 200)}</div>` : ''}`
      : '';
  return `<span class="status ${op.status}">${op.status}</span> <span class="muted">${escapeHtml(op.execution ?? '')}</span>${paused}`;
}

/** Rate and ETA while it runs; how long it took once finished. */
export function paceCell(op: OperatorOperationRow): string {
  if (isFinished(op.status)) {
    const took = (new Date(op.updated_at).getTime() - new Date(op.created_at).getTime()) / 1000;
    return `<span class="pace">took ${formatDuration(took)}</span>`;
  }
  if (op.status !== 'active') {
    return '<span class="pace">—</span>';
  }
  const pace = paceOf(op.pace_items, op.pace_seconds, remainingOfRow(op));
  if (pace.perSecond === null) {
    return '<span class="pace">no items in the last minute</span>';
  }
  return `<span class="pace">${formatRate(pace.perSecond)}</span> <span class="muted eta">ETA ${formatDuration(pace.etaSeconds ?? 0)}</span>`;
}

function lastFailure(op: OperatorOperationRow): string {
  if (!op.last_failure_item) {
    return '';
  }
  return `<div class="id">${text(op.last_failure_item, 80)}</div><div class="reason">${text(op.last_failure_reason, 160)}</div>`;
}

/** Pause and Resume post at once; Cancel asks first, on a page of its own. */
export function actions(op: OperatorOperationRow, readOnly: boolean): string {
  if (readOnly || isFinished(op.status)) {
    return '';
  }
  const post = (action: 'pause' | 'resume', label: string) =>
    `<form method="post" action="${OPERATIONS_PAGE_PATH}/${op.id}/${action}"><button type="submit" name="action" value="${action}">${label}</button></form>`;
  if (op.status === 'awaiting_approval') {
    // A person's decision (routes/admin-approvals.ts); a rejection cancels.
    const decide = (decision: 'approve' | 'reject', label: string) =>
      `<form method="post" action="/admin/approvals/${op.id}/${decision}"><button type="submit"${decision === 'reject' ? ' class="danger"' : ''}>${label}</button></form>`;
    return `${decide('approve', 'Approve')}${decide('reject', 'Reject')}`;
  }
  return `${op.status === 'active' ? post('pause', 'Pause') : post('resume', 'Resume')}<a class="button danger" href="${OPERATIONS_PAGE_PATH}/${op.id}/cancel">Cancel…</a>`;
}

export function operationRow(op: OperatorOperationRow, readOnly: boolean): string {
  return `<tr data-operation-id="${op.id}" data-status="${op.status}">
<td><a href="${OPERATIONS_PAGE_PATH}/${op.id}">${text(op.operation_type, 64)}</a><div class="id">${op.id}</div><div class="muted">created ${time(op.created_at)}</div></td>
<td>${text(op.organization_name, 80)}<div class="id">${op.conversation_id}</div></td>
<td class="status-cell">${status(op)}</td>
<td class="progress-cell">${progressBar(op)}${counts(op)}</td>
<td class="nowrap">${paceCell(op)}<div class="muted">updated ${time(op.updated_at)}</div></td>
<td>${lastFailure(op)}</td>
<td class="nowrap">${actions(op, readOnly)}</td></tr>`;
}

export function operationTable(rows: string, empty = 'No operations.'): string {
  const headers = ROW_HEADERS.map((h) => `<th>${h}</th>`).join('');
  return `<table><thead><tr>${headers}</tr></thead><tbody id="rows">${rows || `<tr><td colspan="${ROW_HEADERS.length}">${empty}</td></tr>`}</tbody></table>`;
}
