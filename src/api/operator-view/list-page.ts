/**
 * The list of operations: a search, honest paging (how many match, where this page is, newer
 * and older), and the rows in creation order — newest first, and a row keeps its place while
 * its status changes. The page's script follows the rows live (stream.ts) and says when newer
 * operations have arrived, without reloading or reordering anything.
 */
import { z } from 'zod';
import { BULK_ACTIONS, instant } from '../../domain/bulk-action.ts';
import { OPERATION_STATUS } from '../../domain/operation.ts';
import type { OperatorListFilter, OperatorListPage, OrganizationQuota } from '../../store/index.ts';
import { BULK_PAGE_PATH, BULK_WORDS } from './bulk-pages.ts';
import { count, escapeHtml, OPERATIONS_PAGE_PATH, page, query } from './html.ts';
import { operationRow, operationTable } from './operation-row.ts';

export const PAGE_SIZE_DEFAULT = 50;
export const PAGE_SIZE_MAX = 100;

const optionalText = (max: number, what: string) =>
  z
    .string({ error: `must be one ${what}` })
    .trim()
    .max(max, `must be at most ${max} characters`)
    .optional();

/** What the list is filtered by (also what the live stream counts newer operations by). */
export const ListFilterQuery = z.object({
  q: optionalText(512, 'search text (an operation, item, conversation or organization id, or a name)'),
  org: optionalText(200, "organization's exact name"),
  status: z
    .enum(OPERATION_STATUS)
    .optional()
    .or(z.literal('').transform(() => undefined)),
  type: optionalText(64, 'operation type'),
  created_before: instant('operations created before it').or(z.literal('').transform(() => undefined)),
  created_after: instant('operations created after it').or(z.literal('').transform(() => undefined)),
});

export const ListQuery = ListFilterQuery.extend({
  older_than: z.uuid({ error: 'must be the operation id a page of older operations starts after' }).optional(),
  newer_than: z.uuid({ error: 'must be the operation id a page of newer operations starts before' }).optional(),
  limit: z.coerce
    .number({ error: 'must be a number of rows' })
    .int()
    .min(1)
    .max(PAGE_SIZE_MAX, `must be at most ${PAGE_SIZE_MAX} rows`)
    .default(PAGE_SIZE_DEFAULT),
}).refine((q) => !(q.older_than && q.newer_than), {
  message: 'give older_than or newer_than, not both',
  path: ['older_than'],
});
export type ListQuery = z.output<typeof ListQuery>;

export function filterOf(q: z.output<typeof ListFilterQuery>): OperatorListFilter {
  return {
    search: q.q,
    organizationName: q.org,
    status: q.status,
    operationType: q.type,
    createdBefore: q.created_before,
    createdAfter: q.created_after,
  };
}

/** Whether the list is filtered at all (its bulk buttons then act on what it shows). */
function filtered(q: z.output<typeof ListFilterQuery>): boolean {
  return Boolean(q.q || q.org || q.status || q.type || q.created_before || q.created_after);
}

/** The filter's own parameters, carried by every link of the page. */
function filterParams(q: ListQuery) {
  return {
    q: q.q,
    org: q.org,
    status: q.status,
    type: q.type,
    created_before: q.created_before,
    created_after: q.created_after,
    limit: q.limit === PAGE_SIZE_DEFAULT ? undefined : q.limit,
  };
}

function searchForm(q: ListQuery): string {
  const statusOptions = ['', ...OPERATION_STATUS]
    .map((s) => `<option value="${s}"${s === (q.status ?? '') ? ' selected' : ''}>${s || 'any status'}</option>`)
    .join('');
  return `<form class="filters" method="get" action="${OPERATIONS_PAGE_PATH}">
<input name="q" value="${escapeHtml(q.q)}" placeholder="operation id, item id, conversation id or organization" aria-label="Search">
<select name="status" aria-label="Status">${statusOptions}</select>
<input name="type" value="${escapeHtml(q.type)}" placeholder="operation type" aria-label="Operation type">
<input name="created_after" value="${escapeHtml(q.created_after)}" placeholder="created after (2026-01-31T12:00:00Z)" aria-label="Created after">
<input name="created_before" value="${escapeHtml(q.created_before)}" placeholder="created before" aria-label="Created before">
${q.org ? `<input type="hidden" name="org" value="${escapeHtml(q.org)}">` : ''}<button type="submit">Search</button>
<a href="${OPERATIONS_PAGE_PATH}">clear</a></form>`;
}

function pager(q: ListQuery, result: OperatorListPage): string {
  const first = result.rows[0];
  const last = result.rows.at(-1);
  if (!first || !last) {
    return result.total > 0
      ? `<div class="pager">Nothing on this page (it starts past the end, or at an operation that is gone). <a href="${OPERATIONS_PAGE_PATH}${query(filterParams(q))}">Newest operations</a></div>`
      : '';
  }
  const params = filterParams(q);
  const newer =
    first.position > 1
      ? `<a rel="prev" href="${OPERATIONS_PAGE_PATH}${query({ ...params, newer_than: first.id })}">‹ Newer</a>`
      : '<span class="muted">‹ Newer</span>';
  const older =
    last.position < result.total
      ? `<a rel="next" href="${OPERATIONS_PAGE_PATH}${query({ ...params, older_than: last.id })}">Older ›</a>`
      : '<span class="muted">Older ›</span>';
  return `<div class="pager"><span class="showing">Showing ${count(first.position)}–${count(last.position)} of ${count(result.total)}</span>${newer}${older}</div>`;
}

/** Where the page's script follows its rows (and, on the newest page, counts newer operations). */
function streamUrl(q: ListQuery, result: OperatorListPage): string {
  const onNewest = (result.rows[0]?.position ?? 1) === 1;
  return `${OPERATIONS_PAGE_PATH}/stream${query({
    ids: result.rows.map((r) => r.id).join(','),
    ...(onNewest ? { ...filterParams(q), limit: undefined, newer_than: result.rows[0]?.id ?? 'none' } : {}),
  })}`;
}

/** One organization's quota, above its operations: what it uses, its limits and where they come from. */
function quotaLine(quota: OrganizationQuota | null | undefined): string {
  if (!quota) {
    return '';
  }
  const source = (own: number | null, variable: string) => (own === null ? `default, ${variable}` : 'set for it');
  const weight = quota.fair_share_weight === null ? '1 (default)' : `${count(quota.fair_share_weight)} (set for it)`;
  return `<p class="quota">Quota: <b>${count(quota.stored_items)}</b> of ${count(quota.limits.stored_items)} stored items (${source(quota.max_stored_items, 'OPSPAD_MAX_STORED_ITEMS')}), <b>${count(quota.open_operations)}</b> of ${count(quota.limits.open_operations)} open operations (${source(quota.max_open_operations, 'OPSPAD_MAX_OPEN_OPERATIONS')}). Fair-share weight: <b>${weight}</b>. <span class="muted">Change with opspad orgs limits --org &lt;name&gt; or PUT /admin/organizations/&lt;name&gt;/limits.</span></p>${keyLimitList(quota.key_limits)}`;
}

/** The organization's own provider limits per handler type and key (names escaped: a tenant's). */
function keyLimitList(limits: OrganizationQuota['key_limits']): string {
  if (limits.length === 0) {
    return '';
  }
  const own = "handler's own";
  const items = limits.map((limit) => {
    const key = limit.key === null ? 'every key' : `key <code>${escapeHtml(limit.key)}</code>`;
    const rate = limit.rate ? `${count(limit.rate.max)} per ${count(limit.rate.interval_ms)} ms` : own;
    const concurrency = limit.concurrency === null ? own : count(limit.concurrency);
    return `<li><code>${escapeHtml(limit.operation_type)}</code>, ${key}: rate ${rate}, concurrency ${concurrency}</li>`;
  });
  return `<div class="quota">Key-limit overrides:<ul>${items.join('')}</ul></div>`;
}

/** With a filter in force: "Pause all N matching…" and the others, each asking first on a page of its own. */
function bulkButtons(q: ListQuery, total: number, readOnly: boolean): string {
  if (readOnly || total === 0 || !filtered(q)) {
    return '';
  }
  const filter = {
    q: q.q,
    org: q.org,
    status: q.status,
    type: q.type,
    created_before: q.created_before,
    created_after: q.created_after,
  };
  const links = BULK_ACTIONS.map(
    (action) =>
      `<a class="button${action === 'cancel' ? ' danger' : ''}" href="${BULK_PAGE_PATH}${escapeHtml(query({ ...filter, action }))}">${escapeHtml(BULK_WORDS[action].button)} all ${count(total)} matching…</a>`,
  ).join('');
  return `<div class="bulk">${links}</div>`;
}

/** The list page; `quota`: the organization's, when the list is filtered to one. */
export function listPage(
  q: ListQuery,
  result: OperatorListPage,
  readOnly: boolean,
  quota?: OrganizationQuota | null,
): string {
  const readOnlyNote = readOnly
    ? '<p class="muted">Read-only (OPSPAD_ADMIN_READONLY): operations cannot be paused, resumed or cancelled here.</p>'
    : '';
  const newest = `${OPERATIONS_PAGE_PATH}${query(filterParams(q))}`;
  return page(
    'opspad · operations',
    `<h1>Operations</h1>${readOnlyNote}${quotaLine(quota)}${searchForm(q)}${bulkButtons(q, result.total, readOnly)}
<div id="newer" class="notice" hidden><span class="n">0</span> newer operation(s) match. <a href="${newest}">Show the newest</a></div>
${pager(q, result)}
${operationTable(
  result.rows.map((op) => operationRow(op, readOnly)).join(''),
  filtered(q) ? 'No operation matches.' : 'No operations.',
)}
${pager(q, result)}
<div id="live-config" data-stream="${escapeHtml(streamUrl(q, result))}"></div>`,
  );
}
