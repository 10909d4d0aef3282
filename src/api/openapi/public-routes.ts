/** The routes outside /v1: health, this document and its page, and the operator pages. */
import { z } from 'zod';
import { Liveness, Readiness, ServiceIndex } from '../../domain/conversation-output.ts';
import { LimitsBody, LimitsParams, OrganizationLimits } from '../routes/admin-limits.ts';
import {
  ACTIONS as OPERATOR_ACTIONS,
  ActionForm as OperatorActionForm,
  DetailQuery as OperatorDetailQuery,
  Filter as OperatorFilter,
  Params as OperatorParams,
  StreamQuery as OperatorStreamQuery,
} from '../routes/admin-operations.ts';
import { DOCS_ASSETS, type DocsAsset } from './docs-assets.ts';
import type { RouteSpec } from './route-spec.ts';

const html = (description: string) => ({ description, other: { contentType: 'text/html' } });

export const PUBLIC_ROUTES: RouteSpec[] = [
  {
    method: 'get',
    path: '/',
    operationId: 'service_index',
    summary: 'Where things are: a page of links for a browser, their paths as JSON for anyone else',
    tag: 'Reference',
    auth: 'none',
    responses: {
      200: {
        description: 'HTML when the request prefers it (a browser), else JSON.',
        json: { name: 'ServiceIndex', schema: ServiceIndex },
        other: { contentType: 'text/html' },
      },
    },
    errors: [],
  },
  {
    method: 'get',
    path: '/healthz',
    operationId: 'liveness',
    summary: 'The process is up',
    tag: 'Health',
    auth: 'none',
    responses: { 200: { description: 'Up.', json: { name: 'Liveness', schema: Liveness } } },
    errors: [],
  },
  {
    method: 'get',
    path: '/readyz',
    operationId: 'readiness',
    summary: 'Postgres and the queue backend (Redis, or Postgres) answer, and the process is not shutting down',
    tag: 'Health',
    auth: 'none',
    responses: {
      200: { description: 'Ready.', json: { name: 'Readiness', schema: Readiness } },
      503: {
        description: 'Not ready: a check failed, or shutdown has begun.',
        json: { name: 'Readiness', schema: Readiness },
      },
    },
    errors: [],
  },
  {
    method: 'get',
    path: '/openapi.json',
    operationId: 'openapi_document',
    summary: 'This document',
    tag: 'Reference',
    auth: 'none',
    responses: { 200: { description: 'OpenAPI 3.1.', other: { contentType: 'application/json' } } },
    errors: [],
  },
  {
    method: 'get',
    path: '/docs',
    operationId: 'api_reference',
    summary: 'This document as a readable page (Redoc, served from this server)',
    tag: 'Reference',
    auth: 'none',
    responses: { 200: html('The page.') },
    errors: [],
  },
  {
    method: 'get',
    path: '/docs/assets/:file',
    operationId: 'api_reference_asset',
    summary: 'A file of the reference page: Redoc’s bundle, its licences, the script that starts it',
    tag: 'Reference',
    auth: 'none',
    params: z.object({ file: z.enum(Object.keys(DOCS_ASSETS) as [DocsAsset, ...DocsAsset[]]) }),
    responses: { 200: { description: 'The file.', other: { contentType: 'text/javascript' } } },
    errors: ['not_found', 'service_unavailable'],
  },
];

export const OPERATOR_ROUTES: RouteSpec[] = [
  {
    method: 'get',
    path: '/metrics',
    operationId: 'metrics',
    summary: 'Prometheus metrics',
    tag: 'Operator',
    auth: 'operator',
    responses: { 200: { description: 'Metrics.', other: { contentType: 'text/plain' } } },
    errors: ['unauthorized'],
  },
  {
    method: 'get',
    path: '/admin/queues',
    operationId: 'bull_board',
    summary: 'Bull Board: the queues and their jobs (a web app under this path)',
    tag: 'Operator',
    auth: 'operator',
    responses: { 200: html('Bull Board.') },
    errors: ['unauthorized'],
  },
  {
    method: 'get',
    path: '/admin/operations',
    operationId: 'operator_operations',
    summary: 'The operator view: every organization’s operations, searched and paged',
    description:
      'Newest first, by creation (a row keeps its place as it runs). `q` finds an operation, conversation or organization by id, an item by its id, or organizations by part of their name. Pages by key: `older_than` / `newer_than` name the operation a page starts after / before.',
    tag: 'Operator',
    auth: 'operator',
    query: OperatorFilter,
    responses: { 200: html('The page.') },
    errors: ['unauthorized', 'validation_failed'],
  },
  {
    method: 'get',
    path: '/admin/operations/assets/operator-view.js',
    operationId: 'operator_view_script',
    summary: 'The operator pages’ script (live updates)',
    tag: 'Operator',
    auth: 'operator',
    responses: { 200: { description: 'The script.', other: { contentType: 'text/javascript' } } },
    errors: ['unauthorized'],
  },
  {
    method: 'get',
    path: '/admin/operations/stream',
    operationId: 'operator_view_stream',
    summary: 'Live updates of an operator page (server-sent events)',
    description:
      'Events: `row` {id, html} when a watched operation (`ids`) changes; `audit` {operation_id, html} per new audit-trail entry after `audit_after` (its id as the SSE id); `newer` {count} of operations matching the filter created after `newer_than`; `end` when the server shuts down.',
    tag: 'Operator',
    auth: 'operator',
    query: OperatorStreamQuery,
    responses: { 200: { description: 'The stream.', other: { contentType: 'text/event-stream' } } },
    errors: ['unauthorized', 'validation_failed', 'too_many_streams'],
  },
  {
    method: 'get',
    path: '/admin/operations/:operationId',
    operationId: 'operator_operation',
    summary: 'One operation: progress, pace, failures grouped by reason, failed items, audit trail',
    tag: 'Operator',
    auth: 'operator',
    params: OperatorParams,
    query: OperatorDetailQuery,
    responses: { 200: html('The page.') },
    errors: ['unauthorized', 'validation_failed', 'not_found'],
  },
  {
    method: 'get',
    path: '/admin/operations/:operationId/cancel',
    operationId: 'operator_confirm_cancel',
    summary: 'Asks to confirm a cancel, saying what it abandons',
    tag: 'Operator',
    auth: 'operator',
    params: OperatorParams,
    responses: { 200: html('The page.') },
    errors: ['unauthorized', 'validation_failed', 'not_found'],
  },
  {
    method: 'post',
    path: '/admin/operations/:operationId/:action',
    operationId: 'operator_action',
    summary: 'Pause, resume or cancel an operation from the operator view',
    description:
      'Must come from the operator page itself (Origin or Referer of this host). A cancel must carry `confirm=yes` (what its confirmation page posts).',
    tag: 'Operator',
    auth: 'operator',
    params: OperatorParams.extend({ action: z.enum(OPERATOR_ACTIONS) }),
    body: {
      name: 'OperatorActionForm',
      schema: OperatorActionForm.describe('What the page’s button posts.'),
      required: false,
      contentType: 'application/x-www-form-urlencoded',
    },
    responses: {
      303: {
        description: 'Done: back to the page the button was on.',
        headers: { Location: { description: 'The operator page.', schema: { type: 'string' } } },
      },
    },
    errors: ['unauthorized', 'validation_failed', 'not_found', 'operation_finished', 'operation_not_active'],
  },
  {
    method: 'get',
    path: '/admin/organizations/:name/limits',
    operationId: 'organization_limits',
    summary:
      "An organization's quota: stored items and open operations, its own limits and those in force, its fair-share weight and key-limit overrides",
    tag: 'Operator',
    auth: 'operator',
    params: LimitsParams,
    responses: { 200: { description: 'The quota.', json: { name: 'OrganizationLimits', schema: OrganizationLimits } } },
    errors: ['unauthorized', 'validation_failed', 'not_found'],
  },
  {
    method: 'put',
    path: '/admin/organizations/:name/limits',
    operationId: 'set_organization_limits',
    summary:
      "Sets an organization's own quota, fair-share weight and key-limit overrides (a number) or returns them to the default (null)",
    description:
      'JSON only (`application/json`); refused in read-only mode (OPSPAD_ADMIN_READONLY). `key_limits` lists the overrides to change, each by `operation_type` and `key` (null: every key); those not listed stay, and one left with neither `rate` nor `concurrency` is removed. Everything in the body changes in one transaction, or nothing does.',
    tag: 'Operator',
    auth: 'operator',
    params: LimitsParams,
    body: { name: 'OrganizationLimitsChange', schema: LimitsBody, required: true },
    responses: { 200: { description: 'The quota.', json: { name: 'OrganizationLimits', schema: OrganizationLimits } } },
    errors: ['unauthorized', 'validation_failed', 'not_found', 'forbidden'],
  },
];
