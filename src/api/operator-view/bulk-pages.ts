/**
 * The operator view's pages for bulk actions: the confirmation a "Pause all N matching…" button
 * leads to (how many operations match now, by status, the filter, and what the action does to
 * them), and an action's progress. Every value is HTML-escaped: organization names, types and
 * search text come from tenants or from the operator's own query string.
 */
import type { BulkActionName, BulkFilter } from '../../domain/bulk-action.ts';
import type { BulkActionRecord, BulkPreview, BulkTargetOutcome } from '../../store/index.ts';
import { count, escapeHtml, OPERATIONS_PAGE_PATH, page, query, text, time } from './html.ts';

export const BULK_PAGE_PATH = `${OPERATIONS_PAGE_PATH}/bulk`;

/** Button words and what each action does, for the pages. */
export const BULK_WORDS: Record<BulkActionName, { button: string; does: string }> = {
  pause: { button: 'Pause', does: 'Active operations are paused (workers stop within one batch); others are skipped.' },
  resume: {
    button: 'Resume',
    does: 'Paused operations become active again; others are skipped, and so is one whose conversation has another active operation.',
  },
  cancel: {
    button: 'Cancel',
    does: 'Active, paused and awaiting operations are cancelled for good: their items not recorded yet are abandoned.',
  },
  retry_failed: {
    button: 'Retry the failed items of',
    does: 'Each operation with failed items gets a new operation retrying them; those without are skipped.',
  },
};

/** The filter as query parameters (for links and the confirmation form). */
export function filterParams(filter: BulkFilter): Record<string, string | undefined> {
  return {
    org: filter.org,
    type: filter.type,
    status: filter.status,
    q: filter.q,
    created_before: filter.created_before,
    created_after: filter.created_after,
  };
}

function filterList(filter: BulkFilter): string {
  const rows = Object.entries(filterParams(filter))
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => `<dt>${escapeHtml(k)}</dt><dd>${text(v, 512)}</dd>`)
    .join('');
  return `<dl class="facts">${rows}</dl>`;
}

function hiddenFields(fields: Record<string, string | number | undefined>): string {
  return Object.entries(fields)
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => `<input type="hidden" name="${escapeHtml(k)}" value="${escapeHtml(v)}">`)
    .join('');
}

/** "Pause all 12 matching…": asks first, with the count now and the filter. */
export function confirmBulkPage(
  action: BulkActionName,
  filter: BulkFilter,
  preview: BulkPreview & { applicable: number | null; max_operations: number },
  readOnly: boolean,
): string {
  const words = BULK_WORDS[action];
  const back = `<a href="${OPERATIONS_PAGE_PATH}${query(filterParams(filter))}">Back to the operations</a>`;
  const byStatus = Object.entries(preview.by_status)
    .map(([status, n]) => `<span class="status ${escapeHtml(status)}">${escapeHtml(status)}</span> ${count(n ?? 0)}`)
    .join(' · ');
  let body: string;
  if (preview.matched === 0) {
    body = `<p>No operation matches: there is nothing to do.</p><p>${back}</p>`;
  } else if (preview.matched > preview.max_operations) {
    body = `<p><strong>${count(preview.matched)}</strong> operations match, more than one bulk action takes (${count(preview.max_operations)}, OPSPAD_MAX_BULK_OPERATIONS): narrow the filter.</p><p>${back}</p>`;
  } else if (readOnly) {
    body = `<p class="muted">Read-only (OPSPAD_ADMIN_READONLY): nothing can be changed here.</p><p>${back}</p>`;
  } else {
    const applicable =
      preview.applicable === null ? '' : ` It changes <strong>${count(preview.applicable)}</strong> of them now.`;
    body = `<p><strong>${count(preview.matched)}</strong> operation(s) match now (${byStatus}).${applicable} ${escapeHtml(words.does)} An operation created from now on is not caught.</p>
<form method="post" action="${BULK_PAGE_PATH}">${hiddenFields({
      ...filterParams(filter),
      action,
      expected_matched: preview.matched,
      confirm: 'yes',
    })}<button type="submit" class="${action === 'cancel' ? 'danger' : ''}">${escapeHtml(words.button)} all ${count(preview.matched)} matching</button></form> ${back}`;
  }
  return page(
    `opspad · ${words.button.toLowerCase()} all matching`,
    `<h1>${escapeHtml(words.button)} all matching operations?</h1>${filterList(filter)}${body}`,
  );
}

/** The newest bulk actions, each with who, what, the filter and how far it got. */
export function bulkListPage(records: readonly BulkActionRecord[]): string {
  const rows = records
    .map((r) => {
      const filter = Object.entries(filterParams(r.filter))
        .filter(([, v]) => v !== undefined)
        .map(([k, v]) => `${escapeHtml(k)}=${text(v, 80)}`)
        .join(' ');
      return `<tr><td><a href="${BULK_PAGE_PATH}/${escapeHtml(r.id)}">${escapeHtml(r.action)}</a></td><td class="status">${escapeHtml(r.status)}</td><td>${text(r.actor)}</td><td>${filter}</td><td class="nowrap">${count(r.applied)} applied, ${count(r.skipped)} skipped of ${count(r.matched)}</td><td>${time(r.created_at)}</td></tr>`;
    })
    .join('');
  return page(
    'opspad · bulk actions',
    `<h1>Bulk actions</h1><p class="muted">Filter the operations, then use a "… all N matching" button to start one.</p>
${rows ? `<table><tr><th>Action</th><th>Status</th><th>By</th><th>Filter</th><th>Progress</th><th>Created</th></tr>${rows}</table>` : '<p>No bulk action yet.</p>'}`,
  );
}

/** A bulk action's record and progress; its skipped operations with why. */
export function bulkProgressPage(record: BulkActionRecord, skipped: readonly BulkTargetOutcome[]): string {
  const words = BULK_WORDS[record.action] ?? BULK_WORDS.pause;
  const skippedRows = skipped
    .map(
      (t) =>
        `<tr><td class="id"><a href="${OPERATIONS_PAGE_PATH}/${escapeHtml(t.operation_id)}">${escapeHtml(t.operation_id)}</a></td><td class="reason">${text(t.detail, 300)}</td></tr>`,
    )
    .join('');
  return page(
    `opspad · bulk ${record.action}`,
    `<h1>${escapeHtml(words.button)} all matching: <span class="status">${escapeHtml(record.status)}</span></h1>
<dl class="facts"><dt>id</dt><dd class="id">${escapeHtml(record.id)}</dd><dt>by</dt><dd>${text(record.actor)}</dd>
<dt>created</dt><dd>${time(record.created_at)}</dd><dt>finished</dt><dd>${time(record.finished_at)}</dd>
<dt>matched</dt><dd>${count(record.matched)}</dd><dt>applied</dt><dd>${count(record.applied)}</dd>
<dt>skipped</dt><dd>${count(record.skipped)}</dd><dt>pending</dt><dd>${count(record.pending)}</dd></dl>
<h2>Filter</h2>${filterList(record.filter)}
${record.status === 'running' ? '<p class="muted">Running: this page reloads every 2 seconds.</p>' : ''}
${skippedRows ? `<h2>Skipped</h2><table><tr><th>Operation</th><th>Why</th></tr>${skippedRows}</table>` : ''}
<p><a href="${OPERATIONS_PAGE_PATH}${query(filterParams(record.filter))}">The matching operations</a></p>`,
  );
}
