/**
 * The operator view, `/admin/operations`: every organization's operations with progress bars,
 * failure reasons and pause / resume / cancel buttons. Server-rendered HTML (no build step),
 * behind the same basic auth as Bull Board. Buttons go through the operation tool, so an
 * operator's pause is exactly an assistant's pause: same rules, same events, same worker signals.
 *
 * Every value from the database is HTML-escaped (operation types, notes and failure reasons come
 * from tenants). Buttons are POST forms; a POST must come from this page's own origin, since a
 * browser would otherwise attach the basic-auth credentials to a forged cross-site form — the
 * check Bull Board's changes pass too (operator-guard.ts). In read-only mode there are no buttons
 * and every POST is refused.
 */
import { type Request, Router } from 'express';
import { z } from 'zod';
import { AppError } from '../../domain/errors.ts';
import { OPERATION_STATUS, remainingOf } from '../../domain/operation.ts';
import { parseOrThrow } from '../../domain/validation.ts';
import {
  type AdminOperationRow,
  type Database,
  failuresPage,
  getOperationAnyOrganization,
  listOperationsAllOrganizations,
} from '../../store/index.ts';
import type { ToolRegistry } from '../../tools/registry.ts';
import { assertOperatorMayChange } from '../operator-guard.ts';

export const OPERATIONS_PAGE_PATH = '/admin/operations';

export const Filter = z.object({
  org: z.string().trim().max(200).optional(),
  status: z
    .enum(OPERATION_STATUS)
    .optional()
    .or(z.literal('').transform(() => undefined)),
});
export const Params = z.object({ operationId: z.uuid({ error: 'must be an operation id' }) });
export const ACTIONS = ['pause', 'resume', 'cancel'] as const;

/** Escapes text for HTML element content and quoted attribute values. */
export function escapeHtml(value: unknown): string {
  return String(value ?? '').replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

const STYLE = `
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#1f2937;background:#f9fafb}
h1{font-size:20px;margin:0 0 12px} a{color:#2563eb}
table{border-collapse:collapse;width:100%;background:#fff}
th,td{padding:8px;border-bottom:1px solid #e5e7eb;text-align:left;vertical-align:top}
th{font-size:12px;text-transform:uppercase;color:#6b7280}
.bar{width:180px;height:12px;background:#e5e7eb;border-radius:6px;overflow:hidden;display:flex}
.bar .ok{background:#10b981}.bar .ko{background:#ef4444}
.status{font-weight:600}.active{color:#059669}.paused{color:#d97706}.completed{color:#2563eb}.cancelled{color:#6b7280}
form{display:inline} button{margin-right:4px;cursor:pointer}
.muted{color:#6b7280;font-size:12px} .reasons{margin:4px 0 0;padding-left:16px;font-size:12px;color:#b91c1c}
`;

function page(title: string, body: string): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(title)}</title>
<meta http-equiv="refresh" content="5"><style>${STYLE}</style></head><body>
<p><a href="${OPERATIONS_PAGE_PATH}">Operations</a> · <a href="/admin/queues">Bull Board</a></p>
${body}</body></html>`;
}

function progressBar(op: AdminOperationRow): string {
  const total = Math.max(1, op.total_items);
  const ok = (op.completed_count / total) * 100;
  const ko = (op.failed_count / total) * 100;
  return `<div class="bar" title="${op.completed_count} completed, ${op.failed_count} failed of ${op.total_items}"><div class="ok" style="width:${ok.toFixed(2)}%"></div><div class="ko" style="width:${ko.toFixed(2)}%"></div></div>`;
}

function buttons(op: AdminOperationRow, readOnly: boolean): string {
  if (readOnly) {
    return '';
  }
  const allowed = op.status === 'active' ? ['pause', 'cancel'] : op.status === 'paused' ? ['resume', 'cancel'] : [];
  return allowed
    .map(
      (action) =>
        `<form method="post" action="${OPERATIONS_PAGE_PATH}/${op.id}/${action}"><button type="submit" name="action" value="${action}">${action[0]?.toUpperCase()}${action.slice(1)}</button></form>`,
    )
    .join('');
}

function row(
  op: AdminOperationRow,
  reasons: readonly { item_id: string; reason: string | null }[],
  readOnly: boolean,
): string {
  const recorded = op.completed_count + op.failed_count;
  const reasonList =
    reasons.length > 0
      ? `<ul class="reasons">${reasons.map((r) => `<li>${escapeHtml(r.item_id)}: ${escapeHtml(r.reason)}</li>`).join('')}</ul>`
      : '';
  const paused =
    op.status === 'paused' && op.state_json.paused_reason
      ? `<div class="muted">${escapeHtml(op.state_json.paused_reason)}</div>`
      : '';
  return `<tr data-operation-id="${op.id}">
<td>${escapeHtml(op.organization_name)}</td>
<td><a href="${OPERATIONS_PAGE_PATH}/${op.id}">${escapeHtml(op.operation_type)}</a><div class="muted">${op.id}</div></td>
<td><span class="status ${op.status}">${op.status}</span>${paused}</td>
<td>${progressBar(op)}<div class="muted"><span class="recorded">${recorded}</span>/${op.total_items} recorded · ${op.failed_count} failed · ${remainingOf(op)} remaining · ${op.in_flight_count} in flight</div>${reasonList}</td>
<td>${buttons(op, readOnly)}</td></tr>`;
}

function table(rows: string): string {
  return `<table><thead><tr><th>Organization</th><th>Operation</th><th>Status</th><th>Progress</th><th></th></tr></thead><tbody>${rows || '<tr><td colspan="5">No operations.</td></tr>'}</tbody></table>`;
}

/** Where to go after a button: back to the operator page it came from, never elsewhere. */
function backTo(req: Request): string {
  try {
    const from = new URL(req.get('referer') ?? '');
    return from.pathname.startsWith(OPERATIONS_PAGE_PATH) ? `${from.pathname}${from.search}` : OPERATIONS_PAGE_PATH;
  } catch {
    return OPERATIONS_PAGE_PATH;
  }
}

export function adminOperationsRouter(deps: {
  db: Database;
  tools: ToolRegistry;
  adminUser: string;
  /** OPSPAD_ADMIN_READONLY */
  readOnly: boolean;
}): Router {
  const router = Router();
  const readOnlyNote = deps.readOnly
    ? '<p class="muted">Read-only (OPSPAD_ADMIN_READONLY): operations cannot be paused, resumed or cancelled here.</p>'
    : '';

  router.get('/', async (req, res) => {
    const filter = parseOrThrow(Filter, req.query, 'query');
    const operations = await listOperationsAllOrganizations(deps.db, {
      organizationName: filter.org || undefined,
      status: filter.status,
      limit: 200,
    });
    const reasons = await Promise.all(
      operations.map((op) => (op.failed_count > 0 ? failuresPage(deps.db, op.id, -1, 3) : [])),
    );
    const statusOptions = ['', ...OPERATION_STATUS]
      .map((s) => `<option value="${s}"${s === (filter.status ?? '') ? ' selected' : ''}>${s || 'any status'}</option>`)
      .join('');
    res.type('html').send(
      page(
        'opspad · operations',
        `<h1>Operations</h1>${readOnlyNote}
<form method="get"><input name="org" placeholder="organization" value="${escapeHtml(filter.org)}"> <select name="status">${statusOptions}</select> <button>Filter</button></form><p></p>
${table(operations.map((op, i) => row(op, reasons[i] ?? [], deps.readOnly)).join(''))}`,
      ),
    );
  });

  router.get('/:operationId', async (req, res) => {
    const { operationId } = parseOrThrow(Params, req.params, 'path');
    const op = await getOperationAnyOrganization(deps.db, operationId);
    if (!op) {
      throw new AppError('not_found', `Operation ${operationId} was not found.`);
    }
    const failures = await failuresPage(deps.db, op.id, -1, 100);
    res.type('html').send(
      page(
        `opspad · ${op.operation_type}`,
        `<h1>${escapeHtml(op.operation_type)} <span class="status ${op.status}">${op.status}</span></h1>
${table(row(op, [], deps.readOnly))}
<h2>Failures (first ${failures.length} of ${op.failed_count})</h2>
<table><thead><tr><th>Item</th><th>Reason</th></tr></thead><tbody>${failures.map((f) => `<tr><td>${escapeHtml(f.item_id)}</td><td>${escapeHtml(f.reason)}</td></tr>`).join('') || '<tr><td colspan="2">None.</td></tr>'}</tbody></table>`,
      ),
    );
  });

  router.post('/:operationId/:action', async (req, res) => {
    assertOperatorMayChange(req, deps);
    const { operationId } = parseOrThrow(Params, { operationId: req.params.operationId }, 'path');
    const action = parseOrThrow(z.enum(ACTIONS), req.params.action, 'action');
    const op = await getOperationAnyOrganization(deps.db, operationId);
    if (!op) {
      throw new AppError('not_found', `Operation ${operationId} was not found.`);
    }
    await deps.tools.execute(
      'manage_assistant_operation',
      { action, operation_id: op.id },
      {
        scope: { organizationId: op.organization_id, conversationId: op.conversation_id },
        actor: `operator:${deps.adminUser}`,
      },
    );
    res.redirect(303, backTo(req));
  });

  return router;
}
