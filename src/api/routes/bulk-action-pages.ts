/**
 * The operator view's bulk actions, under `/admin/operations/bulk`: the newest ones, the
 * confirmation page a list's "Pause all N matching…" button opens, its POST (from this page's own
 * origin only, and only with the count the page showed), and the action's progress page. The action itself is the
 * admin API's (admin-bulk-actions.ts): same record, same runner, same audit.
 */
import { Router } from 'express';
import { z } from 'zod';
import { BULK_ACTIONS, BulkFilter } from '../../domain/bulk-action.ts';
import { parseOrThrow } from '../../domain/validation.ts';
import { bulkActionTargets, createBulkAction, listBulkActions, previewBulkAction } from '../../store/index.ts';
import { assertOperatorMayChange } from '../operator-guard.ts';
import { BULK_PAGE_PATH, bulkListPage, bulkProgressPage, confirmBulkPage } from '../operator-view/bulk-pages.ts';
import { OPERATIONS_PAGE_PATH } from '../operator-view/html.ts';
import {
  type AdminBulkActionsDeps,
  applicableOf,
  BulkActionParams,
  bulkActionOr404,
  SKIPPED_LISTED,
} from './admin-bulk-actions.ts';

const blankIsAbsent = (value: unknown) => (value === '' ? undefined : value);
const field = z.preprocess(blankIsAbsent, z.string().optional());

const action = z.enum(BULK_ACTIONS, { error: `must be one of ${BULK_ACTIONS.join(', ')}` });

/**
 * The confirmation page's query: the action and the list's filter (empty fields are absent);
 * without an action, the page lists the newest bulk actions.
 */
export const BulkPageQuery = z.object({
  action: action.optional(),
  org: field,
  type: field,
  status: field,
  q: field,
  created_before: field,
  created_after: field,
});

/** What the confirmation page posts. */
export const BulkPageForm = BulkPageQuery.extend({
  action,
  expected_matched: z.coerce.number({ error: 'must be the count the page showed' }).int().min(0),
  confirm: z.literal('yes', { error: 'must be "yes", as the confirmation page posts' }),
});

/** Bulk actions the list page shows. */
const BULK_LIST_SIZE = 50;

const FILTER_FIELDS = ['org', 'type', 'status', 'q', 'created_before', 'created_after'] as const;

function filterOf(q: Omit<z.output<typeof BulkPageQuery>, 'action'>) {
  const fields = Object.fromEntries(FILTER_FIELDS.filter((k) => q[k] !== undefined).map((k) => [k, q[k]]));
  return parseOrThrow(BulkFilter, fields, 'filter');
}

export function bulkActionPagesRouter(deps: AdminBulkActionsDeps): Router {
  const router = Router();
  const path = BULK_PAGE_PATH.slice(OPERATIONS_PAGE_PATH.length);

  router.get(path, async (req, res) => {
    const q = parseOrThrow(BulkPageQuery, req.query, 'query');
    if (!q.action) {
      res.type('html').send(bulkListPage(await listBulkActions(deps.db, BULK_LIST_SIZE)));
      return;
    }
    const filter = filterOf(q);
    const preview = await previewBulkAction(deps.db, filter);
    res
      .type('html')
      .send(
        confirmBulkPage(
          q.action,
          filter,
          { ...preview, applicable: applicableOf(q.action, preview.by_status), max_operations: deps.maxOperations },
          deps.readOnly,
        ),
      );
  });

  router.post(path, async (req, res) => {
    assertOperatorMayChange(req, deps);
    const form = parseOrThrow(BulkPageForm, req.body ?? {}, 'body');
    const record = await createBulkAction(deps.db, {
      action: form.action,
      filter: filterOf(form),
      actor: `operator:${deps.adminUser}`,
      maxOperations: deps.maxOperations,
      expectedMatched: form.expected_matched,
    });
    if (record.status === 'running') {
      deps.runner.run(record.id);
    }
    res.redirect(303, `${BULK_PAGE_PATH}/${record.id}`);
  });

  router.get(`${path}/:id`, async (req, res) => {
    const { id } = parseOrThrow(BulkActionParams, req.params, 'path');
    const record = await bulkActionOr404(deps.db, id);
    const skipped = await bulkActionTargets(deps.db, id, 'skipped', { limit: SKIPPED_LISTED });
    if (record.status === 'running') {
      res.set('Refresh', '2');
    }
    res.type('html').send(bulkProgressPage(record, skipped));
  });

  return router;
}
