/**
 * One operation: what it is, how far and how fast, its failures grouped by reason (with counts
 * and example item ids) and item by item, and its audit trail — who created, paused, resumed or
 * cancelled it, and when. Each list pages; the row and the trail follow live (stream.ts).
 * Also the page that confirms a Cancel.
 */
import { z } from 'zod';
import { itemsPrunedOutput } from '../../domain/retention.ts';
import type {
  FailureGroup,
  FailureRow,
  OperationEvent,
  OperatorItem,
  OperatorOperationDetail,
} from '../../store/index.ts';
import { count, escapeHtml, OPERATIONS_PAGE_PATH, page, query, text, time } from './html.ts';
import { operationRow, operationTable, remainingOfRow } from './operation-row.ts';

export const GROUPS_PER_PAGE = 20;
export const FAILURES_PER_PAGE = 25;
export const AUDIT_PER_PAGE = 50;

export const DetailQuery = z.object({
  groups_page: z.coerce.number({ error: 'must be a page number' }).int().min(1).max(100_000).default(1),
  /** The failed items listed start after item #N (1-based, in item order); 0: from the first. */
  failures_after: z.coerce.number({ error: 'must be an item number' }).int().min(0).default(0),
  audit_before: z.coerce.number({ error: 'must be an audit-trail entry id' }).int().min(1).optional(),
  item: z.string().max(512, 'must be at most 512 characters').optional(),
});
export type DetailQuery = z.output<typeof DetailQuery>;

export interface DetailData {
  op: OperatorOperationDetail;
  groups: { groups: FailureGroup[]; totalGroups: number };
  failures: FailureRow[];
  audit: OperationEvent[];
  item: OperatorItem | null;
}

/** An audit-trail entry's details ("reason: …", "abandoned: 3"), escaped. */
function details(data: Record<string, unknown>): string {
  return Object.entries(data)
    .map(([key, value]) => {
      const shown = typeof value === 'string' ? value : JSON.stringify(value);
      return `${escapeHtml(key)}: ${text(shown, 160)}`;
    })
    .join(' · ');
}

export function auditRow(event: OperationEvent): string {
  return `<tr data-event-id="${event.id}"><td class="nowrap">${time(event.created_at)}</td><td class="kind">${escapeHtml(event.kind)}</td><td class="actor">${text(event.actor, 120)}</td><td>${details(event.data)}</td></tr>`;
}

function facts(op: OperatorOperationDetail): string {
  const rows: [string, string][] = [
    ['Operation', `<span class="id">${op.id}</span>`],
    ['Organization', `${text(op.organization_name, 120)} <span class="id">${op.organization_id}</span>`],
    [
      'Conversation',
      `<a href="${OPERATIONS_PAGE_PATH}${query({ q: op.conversation_id })}" class="id">${op.conversation_id}</a>`,
    ],
    ['Execution', escapeHtml(op.execution ?? '—')],
    ['Created', time(op.created_at)],
    ['Updated', time(op.updated_at)],
    [
      'Batches',
      `${op.batch_size ?? '—'} items each${op.max_parallel_batches ? `, up to ${op.max_parallel_batches} at once` : ''}`,
    ],
    ['Circuit breaker', op.max_failure_rate ? `pauses above ${Math.round(op.max_failure_rate * 100)} % failed` : 'off'],
  ];
  if (op.retry_of) {
    rows.push([
      'Retry of',
      `<a href="${OPERATIONS_PAGE_PATH}/${escapeHtml(op.retry_of)}" class="id">${escapeHtml(op.retry_of)}</a>`,
    ]);
  }
  if (op.notes) {
    rows.push(['Notes', text(op.notes, 2000)]);
  }
  return `<dl class="facts">${rows.map(([k, v]) => `<dt>${k}</dt><dd>${v}</dd>`).join('')}</dl>`;
}

function itemSection(op: OperatorOperationDetail, itemId: string | undefined, item: OperatorItem | null): string {
  if (itemId === undefined) {
    return '';
  }
  const body = item
    ? `<table><thead><tr><th>Item</th><th>#</th><th>Status</th><th>Attempts</th><th>Reason</th><th>Updated</th></tr></thead><tbody><tr><td class="id">${text(item.item_id, 512)}</td><td>#${item.ordinal + 1}</td><td>${escapeHtml(item.status)}</td><td>${item.attempts}</td><td class="reason">${text(item.reason, 2000)}</td><td>${time(item.updated_at)}</td></tr></tbody></table>`
    : `<p>Operation ${op.id} has no item ${text(itemId, 512)}.</p>`;
  return `<h2>Item</h2>${body}`;
}

function groupsSection(op: OperatorOperationDetail, q: DetailQuery, data: DetailData['groups']): string {
  const pages = Math.max(1, Math.ceil(data.totalGroups / GROUPS_PER_PAGE));
  const rows = data.groups
    .map(
      (g) =>
        `<tr><td class="reason">${g.reason === null ? '<span class="muted">(no reason)</span>' : text(g.reason, 600)}</td><td class="group-count">${count(g.count)}</td><td>${g.examples.map((id) => `<a class="id" href="${escapeHtml(`${OPERATIONS_PAGE_PATH}/${op.id}${query({ item: id })}`)}">${text(id, 80)}</a>`).join(', ')}${g.count > g.examples.length ? ' …' : ''}</td></tr>`,
    )
    .join('');
  const link = (n: number, label: string) =>
    `<a href="${OPERATIONS_PAGE_PATH}/${op.id}${query({ groups_page: n === 1 ? undefined : n })}#reasons">${label}</a>`;
  const pager =
    pages > 1
      ? `<div class="pager">Page ${q.groups_page} of ${pages} ${q.groups_page > 1 ? link(q.groups_page - 1, '‹ Previous') : ''} ${q.groups_page < pages ? link(q.groups_page + 1, 'Next ›') : ''}</div>`
      : '';
  return `<h2 id="reasons">Failures by reason</h2><p class="muted">${count(op.failed_count)} failed item(s), ${count(data.totalGroups)} reason(s).</p>
<table><thead><tr><th>Reason</th><th>Items</th><th>Examples</th></tr></thead><tbody>${rows || '<tr><td colspan="3">None.</td></tr>'}</tbody></table>${pager}`;
}

/**
 * After retention deleted the item rows of a finished operation, the groups and the list below
 * see only the failures it kept: say so, with the deleted ones counted by reason.
 */
function prunedSection(op: OperatorOperationDetail): string {
  const pruned = itemsPrunedOutput(op.pruned, op.failed_count);
  if (!pruned) {
    return '';
  }
  const rows = pruned.pruned_failure_reasons
    .map((r) => `<tr><td class="reason">${text(r.reason, 600)}</td><td class="group-count">${count(r.count)}</td></tr>`)
    .join('');
  const other =
    pruned.other_pruned_failures > 0
      ? `<tr><td class="muted">(other reasons)</td><td class="group-count">${count(pruned.other_pruned_failures)}</td></tr>`
      : '';
  return `<h2 id="pruned">Items pruned</h2><p class="muted">Retention deleted this operation's item rows${pruned.at ? ` on ${time(pruned.at)}` : ''} (OPSPAD_RETENTION); its counts stay exact. ${count(pruned.failures_kept)} failure(s) kept below, ${count(pruned.failures_pruned)} deleted${pruned.failures_pruned > 0 ? ', by reason:' : '.'}</p>
${pruned.failures_pruned > 0 ? `<table><thead><tr><th>Reason</th><th>Items deleted</th></tr></thead><tbody>${rows}${other}</tbody></table>` : ''}`;
}

function failuresSection(op: OperatorOperationDetail, q: DetailQuery, failures: FailureRow[]): string {
  const shown = failures.slice(0, FAILURES_PER_PAGE);
  const rows = shown
    .map(
      (f) =>
        `<tr><td>${f.ordinal + 1}</td><td class="id">${text(f.item_id, 200)}</td><td class="reason">${text(f.reason, 600)}</td></tr>`,
    )
    .join('');
  const next =
    failures.length > FAILURES_PER_PAGE
      ? `<a href="${OPERATIONS_PAGE_PATH}/${op.id}${query({ failures_after: (shown.at(-1)?.ordinal ?? 0) + 1 })}#failures">Next ${FAILURES_PER_PAGE} ›</a>`
      : '';
  const first = q.failures_after > 0 ? `<a href="${OPERATIONS_PAGE_PATH}/${op.id}#failures">‹ First</a>` : '';
  return `<h2 id="failures">Failed items</h2><p class="muted">${q.failures_after > 0 ? `After item #${q.failures_after}, in item order.` : 'In item order.'}</p>
<table><thead><tr><th>#</th><th>Item</th><th>Reason</th></tr></thead><tbody>${rows || '<tr><td colspan="3">None.</td></tr>'}</tbody></table>
<div class="pager">${first}${next}</div>`;
}

function auditSection(op: OperatorOperationDetail, audit: OperationEvent[]): string {
  const shown = audit.slice(0, AUDIT_PER_PAGE);
  const older =
    audit.length > AUDIT_PER_PAGE
      ? `<a href="${OPERATIONS_PAGE_PATH}/${op.id}${query({ audit_before: shown.at(-1)?.id })}#audit">Older entries ›</a>`
      : '';
  return `<h2 id="audit">Audit trail</h2><p class="muted">Who created, paused, resumed, cancelled or completed it, and when (newest first; batches are counted in the pace, not listed).</p>
<table><thead><tr><th>When</th><th>What</th><th>Who</th><th>Details</th></tr></thead><tbody id="audit-rows">${shown.map(auditRow).join('') || '<tr><td colspan="4">None.</td></tr>'}</tbody></table>
<div class="pager">${older}</div>`;
}

export function detailPage(q: DetailQuery, data: DetailData, readOnly: boolean): string {
  const { op } = data;
  // Live entries are added only on the trail's newest page.
  const after = q.audit_before === undefined ? (data.audit[0]?.id ?? 0) : null;
  const stream = `${OPERATIONS_PAGE_PATH}/stream${query({ ids: op.id, audit_after: after })}`;
  return page(
    `opspad · ${op.operation_type}`,
    `<h1>${text(op.operation_type, 64)} <span class="status ${op.status}">${op.status}</span></h1>
${facts(op)}
<h2>Progress</h2>${operationTable(operationRow(op, readOnly))}
${itemSection(op, q.item, data.item)}
${auditSection(op, data.audit)}
${prunedSection(op)}
${groupsSection(op, q, data.groups)}
${failuresSection(op, q, data.failures)}
<div id="live-config" data-stream="${escapeHtml(stream)}"></div>`,
  );
}

/** Cancel asks first: what it abandons, what stays recorded, and a way back. */
export function confirmCancelPage(op: OperatorOperationDetail, readOnly: boolean): string {
  const back = `<a href="${OPERATIONS_PAGE_PATH}/${op.id}">Back to the operation</a>`;
  let body: string;
  if (op.status === 'completed' || op.status === 'cancelled') {
    body = `<p>It is already ${op.status}: there is nothing to cancel.</p><p>${back}</p>`;
  } else if (readOnly) {
    body = `<p class="muted">Read-only (OPSPAD_ADMIN_READONLY): operations cannot be cancelled here.</p><p>${back}</p>`;
  } else {
    body = `<p>Cancelling stops it for good: its <strong>${count(remainingOfRow(op))}</strong> item(s) not recorded yet are abandoned (workers stop within one batch). The ${count(op.completed_count)} completed and ${count(op.failed_count)} failed stay recorded.</p>
<form method="post" action="${OPERATIONS_PAGE_PATH}/${op.id}/cancel"><input type="hidden" name="confirm" value="yes"><button type="submit" name="action" value="cancel" class="danger">Cancel the operation</button></form> ${back}`;
  }
  return page(
    `opspad · cancel ${op.operation_type}`,
    `<h1>Cancel ${text(op.operation_type, 64)}?</h1><p class="id">${op.id} · ${text(op.organization_name, 120)} · <span class="status ${op.status}">${op.status}</span></p>${body}`,
  );
}
