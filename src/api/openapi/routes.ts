/**
 * Every route the express app serves, described for the OpenAPI document: parameters and bodies
 * are the zod schemas the routes validate with, answers the schemas of domain/*-output.ts. A test
 * walks the app's router and fails when a route is missing here (test/integration/openapi.test.ts).
 */
import { z } from 'zod';
import {
  ContextFragment,
  ContextRendersPage,
  ErrorBody,
  ExecutionEnded,
  ExecutionStarted,
  GetScratchpadResult,
  PadSettingsResult,
  PadVersionsPage,
  PutScratchpadResult,
  ReorganizeResult,
  ScratchpadEventsPage,
  ToolList,
  TracesPage,
} from '../../domain/conversation-output.ts';
import { RESULT_MEDIA_TYPES, ResultsQuery } from '../../domain/item-results.ts';
import { ConversationOperationsPage, OperationProgress } from '../../domain/operation-output.ts';
import { PadSettingsInput, PutScratchpadBody, ReorganizeBody } from '../../domain/scratchpad-input.ts';
import { TOOL_FORMATS } from '../../tools/formats.ts';
import { ConversationParams as conversation } from '../params.ts';
import { DecidedOutput } from '../routes/admin-approvals.ts';
import { Params as ExecutionParams, CreateBody as StartExecutionBody, TracesQuery } from '../routes/executions.ts';
import { Params as OperationParams, OperationsPageQuery } from '../routes/operations.ts';
import { Page } from '../routes/scratchpad.ts';
import { UserApprovalBody } from '../routes/user-approval.ts';
import { APPROVAL_ROUTES } from './approval-routes.ts';
import { BULK_ACTION_ROUTES } from './bulk-action-routes.ts';
import { MCP_ROUTES } from './mcp-routes.ts';
import { OPERATOR_ROUTES, PUBLIC_ROUTES } from './public-routes.ts';
import { BODY_ERRORS, V1_ERRORS } from './route-errors.ts';
import type { RouteSpec } from './route-spec.ts';
import { TOOL_ROUTES } from './tool-routes.ts';

export { DOCUMENTED_TOOLS } from './tool-routes.ts';
export { ErrorBody };

const SSE_DESCRIPTION = [
  'Server-sent events until the operation ends: `progress` (data: OperationProgress) whenever the counts or status change, one event per audit-trail entry (`created`, `batch_leased`, `batch_recorded`, `lease_expired`, `paused`, `resumed`, `completed`, `cancelled`, `expired`, `retried`; data: OperationAuditEvent; the SSE `id` is the entry’s id), and `end` (data: OperationProgress) when the operation is completed or cancelled.',
  'Comment lines (`: keep-alive`) come every 15 s when nothing else does. Reconnect with `Last-Event-ID` to continue after the last entry received. The stream also ends when the server shuts down: reconnect.',
].join(' ');

const RESULTS_DESCRIPTION = [
  'One line per item, in item order: `item_id`, `status` (`pending`, `leased`, `completed`, `failed`, `abandoned`), `reason` (null unless failed), `attempts` (leases that ended) and `recorded_at` (ISO 8601, null while the item has no outcome).',
  '`format=csv` writes the same columns under a header line (RFC 4180 quoting); a cell that starts with `=`, `+`, `-`, `@`, a tab, a carriage return or an apostrophe gets an apostrophe in front, so no spreadsheet runs it as a formula (take one leading apostrophe off to read the value back).',
  '`status=failed` writes only the failed items, kept failures of a pruned operation included. Streamed in constant memory, page by page: an item recorded meanwhile shows the outcome it had when its page was read. While it streams, the file holds one of the key’s OPSPAD_MAX_STREAMS_PER_KEY slots, as an event stream does (429 too_many_streams beyond them).',
].join(' ');

const V1_ROUTES: RouteSpec[] = [
  {
    method: 'get',
    path: '/v1/tools',
    operationId: 'list_tools',
    summary: 'Tool definitions for function calling',
    description:
      'The tools as JSON Schema, in opspad’s format ({name, description, input_schema}; what `opspad mcp` serves), OpenAI’s strict function format for Chat Completions (`format=openai`) or the Responses API (`format=openai-responses`), or Anthropic’s (`format=anthropic`).',
    tag: 'Tools',
    auth: 'apiKey',
    query: z.object({ format: z.enum(TOOL_FORMATS).optional().describe('Default: opspad.') }),
    responses: { 200: { description: 'The definitions.', json: { name: 'ToolList', schema: ToolList } } },
    errors: [...V1_ERRORS, 'validation_failed'],
  },
  ...TOOL_ROUTES,
  {
    method: 'get',
    path: '/v1/conversations/:conversationId/context',
    operationId: 'get_context',
    summary: 'The context fragment for the system prompt',
    description:
      'Open operations (who paused each, and the next action) and the recited scratchpad, within OPSPAD_CONTEXT_MAX_TOKENS o200k tokens, rebuilt from the database: put `text` at the end of the system prompt every turn. A conversation not used yet answers an empty fragment. `other_conversations=true` also lists the open operations of the organization’s other conversations.',
    tag: 'Context',
    auth: 'apiKey',
    params: conversation,
    query: z.object({
      other_conversations: z
        .enum(['true', 'false'])
        .optional()
        .describe('true: also the open operations of the organization’s other conversations. Default: false.'),
    }),
    responses: { 200: { description: 'The fragment.', json: { name: 'ContextFragment', schema: ContextFragment } } },
    errors: [...V1_ERRORS, 'validation_failed', 'not_found'],
  },
  {
    method: 'get',
    path: '/v1/conversations/:conversationId/scratchpad',
    operationId: 'get_scratchpad',
    summary: 'The structured scratchpad and its settings',
    tag: 'Scratchpad',
    auth: 'apiKey',
    params: conversation,
    responses: { 200: { description: 'The pad.', json: { name: 'GetScratchpadResult', schema: GetScratchpadResult } } },
    errors: [...V1_ERRORS, 'validation_failed', 'not_found'],
  },
  {
    method: 'put',
    path: '/v1/conversations/:conversationId/scratchpad',
    operationId: 'put_scratchpad',
    summary: 'Replace the structured scratchpad',
    description: 'A whole new pad, based on `expected_version` (409 version_conflict when the pad changed since).',
    tag: 'Scratchpad',
    auth: 'apiKey',
    params: conversation,
    body: { name: 'PutScratchpadBody', schema: PutScratchpadBody, required: true },
    responses: {
      200: { description: 'The new version.', json: { name: 'PutScratchpadResult', schema: PutScratchpadResult } },
    },
    errors: [...V1_ERRORS, ...BODY_ERRORS, 'not_found', 'version_conflict'],
  },
  {
    method: 'get',
    path: '/v1/conversations/:conversationId/scratchpad/versions',
    operationId: 'list_scratchpad_versions',
    summary: 'Earlier versions of the scratchpad, newest first',
    tag: 'Scratchpad',
    auth: 'apiKey',
    params: conversation,
    query: Page.pick({ before: true, limit: true }),
    responses: {
      200: { description: 'A page of versions.', json: { name: 'PadVersionsPage', schema: PadVersionsPage } },
    },
    errors: [...V1_ERRORS, 'validation_failed', 'not_found'],
  },
  {
    method: 'get',
    path: '/v1/conversations/:conversationId/scratchpad/events',
    operationId: 'list_scratchpad_events',
    summary: 'Reorganization outcomes, oldest first',
    tag: 'Scratchpad',
    auth: 'apiKey',
    params: conversation,
    query: Page.pick({ after: true, limit: true }),
    responses: {
      200: { description: 'A page of events.', json: { name: 'ScratchpadEventsPage', schema: ScratchpadEventsPage } },
    },
    errors: [...V1_ERRORS, 'validation_failed', 'not_found'],
  },
  {
    method: 'put',
    path: '/v1/conversations/:conversationId/scratchpad/settings',
    operationId: 'put_scratchpad_settings',
    summary: 'Change the pad’s reorganization cadence and retries',
    tag: 'Scratchpad',
    auth: 'apiKey',
    params: conversation,
    body: { name: 'PadSettingsInput', schema: PadSettingsInput, required: true },
    responses: {
      200: { description: 'The settings now.', json: { name: 'PadSettingsResult', schema: PadSettingsResult } },
    },
    errors: [...V1_ERRORS, ...BODY_ERRORS, 'not_found'],
  },
  {
    method: 'post',
    path: '/v1/conversations/:conversationId/scratchpad/reorganize',
    operationId: 'reorganize_scratchpad',
    summary: 'Reorganize the scratchpad now',
    description: 'Runs the configured reorganizer; a rejected result keeps the old version and says why (`status`).',
    tag: 'Scratchpad',
    auth: 'apiKey',
    params: conversation,
    body: { name: 'ReorganizeBody', schema: ReorganizeBody, required: false },
    responses: { 200: { description: 'The outcome.', json: { name: 'ReorganizeResult', schema: ReorganizeResult } } },
    errors: [...V1_ERRORS, ...BODY_ERRORS, 'not_found'],
  },
  {
    method: 'get',
    path: '/v1/conversations/:conversationId/context-renders',
    operationId: 'list_context_renders',
    summary: 'What each context render told the assistant (newest first)',
    tag: 'Context',
    auth: 'apiKey',
    params: conversation,
    query: Page.pick({ limit: true }),
    responses: { 200: { description: 'Renders.', json: { name: 'ContextRendersPage', schema: ContextRendersPage } } },
    errors: [...V1_ERRORS, 'validation_failed', 'not_found'],
  },
  {
    method: 'post',
    path: '/v1/conversations/:conversationId/executions',
    operationId: 'start_execution',
    summary: 'Start an execution of the notes scratchpad',
    description: 'Send its `execution_id` as the `X-Opspad-Execution` header of tool calls to scope their notes to it.',
    tag: 'Notes',
    auth: 'apiKey',
    params: conversation,
    body: { name: 'StartExecutionBody', schema: StartExecutionBody.unwrap(), required: false },
    responses: { 201: { description: 'Started.', json: { name: 'ExecutionStarted', schema: ExecutionStarted } } },
    errors: [...V1_ERRORS, ...BODY_ERRORS, 'not_found'],
  },
  {
    method: 'post',
    path: '/v1/executions/:executionId/end',
    operationId: 'end_execution',
    summary: 'End an execution, clearing its notes (persistent notes stay)',
    description: 'Ending an ended execution answers the same, with `cleared_notes: 0`.',
    tag: 'Notes',
    auth: 'apiKey',
    params: ExecutionParams,
    responses: { 200: { description: 'Ended.', json: { name: 'ExecutionEnded', schema: ExecutionEnded } } },
    errors: [...V1_ERRORS, 'validation_failed', 'not_found'],
  },
  {
    method: 'get',
    path: '/v1/executions/:executionId/traces',
    operationId: 'list_execution_traces',
    summary: 'The reads and writes of an execution, in order',
    tag: 'Notes',
    auth: 'apiKey',
    params: ExecutionParams,
    query: TracesQuery,
    responses: { 200: { description: 'A page of traces.', json: { name: 'TracesPage', schema: TracesPage } } },
    errors: [...V1_ERRORS, 'validation_failed', 'not_found'],
  },
  {
    method: 'get',
    path: '/v1/conversations/:conversationId/operations',
    operationId: 'list_conversation_operations',
    summary: 'A conversation’s operations, finished ones included, newest first',
    description:
      'One keyset page: pass `next_before` as `before` for the next. What an MCP client’s `tasks/list` pages through. A conversation not used yet answers an empty page.',
    tag: 'Operations',
    auth: 'apiKey',
    params: conversation,
    query: OperationsPageQuery,
    responses: {
      200: {
        description: 'One page.',
        json: { name: 'ConversationOperationsPage', schema: ConversationOperationsPage },
      },
    },
    errors: [...V1_ERRORS, 'validation_failed'],
  },
  {
    method: 'get',
    path: '/v1/operations/:operationId',
    operationId: 'get_operation',
    summary: 'An operation’s status and counts, whatever its conversation',
    tag: 'Operations',
    auth: 'apiKey',
    params: OperationParams,
    responses: {
      200: { description: 'Status and counts.', json: { name: 'OperationProgress', schema: OperationProgress } },
    },
    errors: [...V1_ERRORS, 'validation_failed', 'not_found'],
  },
  {
    method: 'post',
    path: '/v1/operations/:operationId/approval',
    operationId: 'record_user_approval',
    summary: 'Records the user’s answer on an operation awaiting approval (a rejection cancels it)',
    description:
      'For the application that asked its user (an MCP client’s elicitation through `opspad mcp`, or its own UI); never offer it to a model as a tool. The audit trail names `user:api_key:<id>`.',
    tag: 'Operations',
    auth: 'apiKey',
    params: OperationParams,
    body: { name: 'UserApproval', schema: UserApprovalBody, required: true },
    responses: {
      200: {
        description: 'The operation after the decision.',
        json: { name: 'DecidedOperation', schema: DecidedOutput },
      },
    },
    errors: [...V1_ERRORS, 'validation_failed', 'not_found', 'operation_finished'],
  },
  {
    method: 'get',
    path: '/v1/operations/:operationId/events',
    operationId: 'stream_operation_events',
    summary: 'An operation’s progress as server-sent events',
    description: SSE_DESCRIPTION,
    tag: 'Operations',
    auth: 'apiKey',
    params: OperationParams,
    headers: [
      {
        name: 'Last-Event-ID',
        description: 'The id of the last audit-trail event received: the stream continues after it.',
        schema: z.string().regex(/^\d+$/),
      },
    ],
    responses: {
      200: {
        description: 'The event stream.',
        other: { contentType: 'text/event-stream', description: SSE_DESCRIPTION },
      },
    },
    errors: [...V1_ERRORS, 'validation_failed', 'not_found'],
  },
  {
    method: 'get',
    path: '/v1/operations/:operationId/results',
    operationId: 'export_operation_results',
    summary: 'Every item’s outcome as one file (JSON Lines or CSV)',
    description: RESULTS_DESCRIPTION,
    tag: 'Operations',
    auth: 'apiKey',
    params: OperationParams,
    query: ResultsQuery,
    responses: {
      200: {
        description: 'The file, streamed (`Content-Disposition: attachment`).',
        other: [
          { contentType: RESULT_MEDIA_TYPES.jsonl, description: 'One ItemResult object a line.' },
          { contentType: RESULT_MEDIA_TYPES.csv, description: 'A header line, then one row an item (CRLF).' },
        ],
      },
    },
    errors: [...V1_ERRORS, 'validation_failed', 'not_found', 'too_many_streams'],
  },
];

/** Every route, in the order the document lists them. */
export const ROUTES: readonly RouteSpec[] = [
  ...V1_ROUTES,
  ...MCP_ROUTES,
  ...PUBLIC_ROUTES,
  ...OPERATOR_ROUTES,
  ...APPROVAL_ROUTES,
  ...BULK_ACTION_ROUTES,
];
