/**
 * The operator view, `/admin/operations`: every organization's operations, searchable and
 * paged, each with its progress, pace, failures grouped by reason and audit trail, followed live
 * (operator-view/*). Server-rendered HTML, behind the same basic auth as Bull Board. Buttons go
 * through the operation tool, so an operator's pause is exactly an assistant's pause: same
 * rules, same events, same worker signals.
 *
 * Each page reads a constant number of statements, whatever its rows: the list is one query,
 * an operation's page four (its row, failure groups, failed items, audit trail).
 *
 * Every value from the database is HTML-escaped (operation types, notes, item ids and failure
 * reasons come from tenants). Buttons are POST forms; a POST must come from this page's own
 * origin, since a browser would otherwise attach the basic-auth credentials to a forged
 * cross-site form — the check Bull Board's changes pass too (operator-guard.ts). Cancel asks for
 * confirmation on a page of its own, and its POST is refused without it. In read-only mode there
 * are no buttons and every POST is refused.
 */
import { type Request, Router } from 'express';
import { z } from 'zod';
import { AppError } from '../../domain/errors.ts';
import { parseOrThrow } from '../../domain/validation.ts';
import {
  auditTrailPage,
  type Database,
  failureGroups,
  failuresPage,
  getOperatorItem,
  getOperatorOperation,
  listOperatorOperations,
  organizationLimits,
  type QuotaDefaults,
} from '../../store/index.ts';
import type { ToolRegistry } from '../../tools/registry.ts';
import { assertOperatorMayChange } from '../operator-guard.ts';
import { OPERATOR_VIEW_SCRIPT } from '../operator-view/client-script.ts';
import {
  AUDIT_PER_PAGE,
  confirmCancelPage,
  DetailQuery,
  detailPage,
  FAILURES_PER_PAGE,
  GROUPS_PER_PAGE,
} from '../operator-view/detail-page.ts';
import { OPERATIONS_PAGE_PATH, SCRIPT_PATH } from '../operator-view/html.ts';
import { filterOf, ListQuery, listPage } from '../operator-view/list-page.ts';
import { operatorStreams, StreamQuery } from '../operator-view/stream.ts';

export { escapeHtml, OPERATIONS_PAGE_PATH } from '../operator-view/html.ts';
export { ListQuery as Filter } from '../operator-view/list-page.ts';
export { DetailQuery, StreamQuery };

export const Params = z.object({ operationId: z.uuid({ error: 'must be an operation id' }) });
export const ACTIONS = ['pause', 'resume', 'cancel'] as const;
/** What the Cancel confirmation page posts; a cancel without it is refused. */
export const ActionForm = z.object({
  action: z.enum(ACTIONS).optional(),
  confirm: z.literal('yes').optional(),
});

/** Where to go after a button: back to the operator page it came from, never elsewhere. */
function backTo(req: Request, fallback: string): string {
  try {
    const from = new URL(req.get('referer') ?? '');
    return from.pathname.startsWith(OPERATIONS_PAGE_PATH) && !from.pathname.endsWith('/cancel')
      ? `${from.pathname}${from.search}`
      : fallback;
  } catch {
    return fallback;
  }
}

async function operationOr404(db: Database, operationId: string) {
  const op = await getOperatorOperation(db, operationId);
  if (!op) {
    throw new AppError('not_found', `Operation ${operationId} was not found.`, { operation_id: operationId });
  }
  return op;
}

export function adminOperationsRouter(deps: {
  db: Database;
  tools: ToolRegistry;
  adminUser: string;
  /** OPSPAD_ADMIN_READONLY */
  readOnly: boolean;
  /** The deployment's quotas, shown beside an organization's own. */
  quota: QuotaDefaults;
  /** How often live pages read the database, and the heartbeat of their streams. */
  stream: { pollMs: number; heartbeatMs: number };
  /** False once the server is shutting down (live pages' streams end). */
  accepting: () => boolean;
}): Router {
  const router = Router();
  const stream = operatorStreams({ db: deps.db, readOnly: deps.readOnly, accepting: deps.accepting, ...deps.stream });

  router.get('/', async (req, res) => {
    const q = parseOrThrow(ListQuery, req.query, 'query');
    const from = q.older_than
      ? { operationId: q.older_than, direction: 'older' as const }
      : q.newer_than
        ? { operationId: q.newer_than, direction: 'newer' as const }
        : undefined;
    const [result, quota] = await Promise.all([
      listOperatorOperations(deps.db, filterOf(q), { limit: q.limit, from }),
      q.org ? organizationLimits(deps.db, q.org, {}, deps.quota) : null,
    ]);
    res.type('html').send(listPage(q, result, deps.readOnly, quota));
  });

  router.get(SCRIPT_PATH.slice(OPERATIONS_PAGE_PATH.length), (_req, res) => {
    res.type('text/javascript; charset=utf-8').set('Cache-Control', 'no-cache').send(OPERATOR_VIEW_SCRIPT);
  });

  router.get('/stream', async (req, res) => {
    await stream(parseOrThrow(StreamQuery, req.query, 'query'), req, res);
  });

  router.get('/:operationId', async (req, res) => {
    const { operationId } = parseOrThrow(Params, req.params, 'path');
    const q = parseOrThrow(DetailQuery, req.query, 'query');
    const op = await operationOr404(deps.db, operationId);
    const [groups, failures, audit, item] = await Promise.all([
      failureGroups(deps.db, op.id, { limit: GROUPS_PER_PAGE, offset: (q.groups_page - 1) * GROUPS_PER_PAGE }),
      failuresPage(deps.db, op.id, q.failures_after - 1, FAILURES_PER_PAGE + 1),
      auditTrailPage(deps.db, op.id, { limit: AUDIT_PER_PAGE + 1, beforeId: q.audit_before }),
      q.item === undefined ? null : getOperatorItem(deps.db, op.id, q.item),
    ]);
    res.type('html').send(detailPage(q, { op, groups, failures, audit, item }, deps.readOnly));
  });

  router.get('/:operationId/cancel', async (req, res) => {
    const { operationId } = parseOrThrow(Params, req.params, 'path');
    res.type('html').send(confirmCancelPage(await operationOr404(deps.db, operationId), deps.readOnly));
  });

  router.post('/:operationId/:action', async (req, res) => {
    assertOperatorMayChange(req, deps);
    const { operationId } = parseOrThrow(Params, { operationId: req.params.operationId }, 'path');
    const action = parseOrThrow(z.enum(ACTIONS), req.params.action, 'action');
    const form = parseOrThrow(ActionForm, req.body ?? {}, 'body');
    if (action === 'cancel' && form.confirm !== 'yes') {
      throw new AppError(
        'validation_failed',
        'Invalid input: body.confirm: a cancel must be confirmed (confirm=yes), as the Cancel… page does; open it to see what cancelling abandons.',
        { issues: [{ field: 'body.confirm', message: 'must be "yes"' }], total_issues: 1 },
      );
    }
    const op = await operationOr404(deps.db, operationId);
    await deps.tools.execute(
      'manage_assistant_operation',
      { action, operation_id: op.id },
      {
        scope: { organizationId: op.organization_id, conversationId: op.conversation_id },
        actor: `operator:${deps.adminUser}`,
      },
    );
    const detail = `${OPERATIONS_PAGE_PATH}/${op.id}`;
    res.redirect(303, action === 'cancel' ? detail : backTo(req, OPERATIONS_PAGE_PATH));
  });

  return router;
}
