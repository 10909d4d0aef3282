/**
 * Operator bulk actions (routes/admin-bulk-actions.ts and the operator view's pages for them,
 * routes/bulk-action-pages.ts): preview a filter, create the action, follow it.
 */
import {
  BulkAction,
  BulkActionDetail,
  BulkActionList,
  BulkActionParams,
  BulkActionPreview,
  CreateBody,
  ListQuery,
  PreviewBody,
} from '../routes/admin-bulk-actions.ts';
import { BulkPageForm, BulkPageQuery } from '../routes/bulk-action-pages.ts';
import type { RouteSpec } from './route-spec.ts';

const jsonOnly = 'JSON only (`application/json`).';
const html = (description: string) => ({ description, other: { contentType: 'text/html' } });

export const BULK_ACTION_ROUTES: RouteSpec[] = [
  {
    method: 'get',
    path: '/admin/bulk-actions',
    operationId: 'admin_bulk_actions',
    summary: 'The newest bulk actions first',
    tag: 'Operator',
    auth: 'operator',
    query: ListQuery,
    responses: { 200: { description: 'The actions.', json: { name: 'BulkActionList', schema: BulkActionList } } },
    errors: ['unauthorized', 'validation_failed'],
  },
  {
    method: 'post',
    path: '/admin/bulk-actions/preview',
    operationId: 'admin_preview_bulk_action',
    summary: 'How many operations a filter matches now, by status, and how many the action would change',
    description: `${jsonOnly} Changes nothing.`,
    tag: 'Operator',
    auth: 'operator',
    body: { name: 'BulkActionPreviewBody', schema: PreviewBody, required: true },
    responses: {
      200: { description: 'The preview.', json: { name: 'BulkActionPreview', schema: BulkActionPreview } },
    },
    errors: ['unauthorized', 'validation_failed', 'invalid_json'],
  },
  {
    method: 'post',
    path: '/admin/bulk-actions',
    operationId: 'admin_create_bulk_action',
    summary: 'Pauses, resumes, cancels or retries the failures of every operation a filter matches',
    description: `${jsonOnly} The operations are those the filter matches at this moment (at most OPSPAD_MAX_BULK_OPERATIONS; one created afterwards is not caught). Answers 202 at once; the action runs in the background, each operation as one operator click on it, with the action's id in its audit event. Refused in read-only mode (OPSPAD_ADMIN_READONLY).`,
    tag: 'Operator',
    auth: 'operator',
    body: { name: 'BulkActionBody', schema: CreateBody, required: true },
    responses: {
      202: {
        description: 'Created; follow it at `url`.',
        json: { name: 'BulkAction', schema: BulkAction },
        headers: { Location: { description: 'The action.', schema: { type: 'string' } } },
      },
    },
    errors: ['unauthorized', 'forbidden', 'validation_failed', 'invalid_json', 'conflict'],
  },
  {
    method: 'get',
    path: '/admin/bulk-actions/:id',
    operationId: 'admin_bulk_action',
    summary: 'A bulk action: who, the filter, how many matched, were applied and were skipped (with why)',
    tag: 'Operator',
    auth: 'operator',
    params: BulkActionParams,
    responses: {
      200: { description: 'The action.', json: { name: 'BulkActionDetail', schema: BulkActionDetail } },
    },
    errors: ['unauthorized', 'validation_failed', 'not_found'],
  },
  {
    method: 'get',
    path: '/admin/operations/bulk',
    operationId: 'operator_bulk_confirm_page',
    summary:
      'Operator view: asks before acting on every operation the list’s filter matches (without `action`: the newest bulk actions)',
    tag: 'Operator',
    auth: 'operator',
    query: BulkPageQuery,
    responses: { 200: html('The confirmation page (the count now, by status, and the filter), or the list.') },
    errors: ['unauthorized', 'validation_failed'],
  },
  {
    method: 'post',
    path: '/admin/operations/bulk',
    operationId: 'operator_bulk_action',
    summary: 'Operator view: the confirmation page’s button',
    description:
      'Must come from the operator page itself (Origin or Referer of this host), with the count the page showed (`expected_matched`) and `confirm=yes`; refused in read-only mode.',
    tag: 'Operator',
    auth: 'operator',
    body: {
      name: 'OperatorBulkActionForm',
      schema: BulkPageForm.describe('What the confirmation page posts.'),
      required: true,
      contentType: 'application/x-www-form-urlencoded',
    },
    responses: {
      303: {
        description: 'Created: on to its progress page.',
        headers: { Location: { description: 'The progress page.', schema: { type: 'string' } } },
      },
    },
    errors: ['unauthorized', 'forbidden', 'validation_failed', 'conflict'],
  },
  {
    method: 'get',
    path: '/admin/operations/bulk/:id',
    operationId: 'operator_bulk_progress_page',
    summary: 'Operator view: a bulk action’s progress',
    tag: 'Operator',
    auth: 'operator',
    params: BulkActionParams,
    responses: { 200: html('The progress page (it reloads while the action runs).') },
    errors: ['unauthorized', 'validation_failed', 'not_found'],
  },
];
