/**
 * The tools endpoint, `POST /v1/conversations/:conversationId/tools/:toolName`, described as one
 * path per tool so that each has its own body and answer for client generators.
 */
import { z } from 'zod';
import { ReadNotesResult, UpdateScratchpadResult, WriteNotesResult } from '../../domain/conversation-output.ts';
import type { ErrorCode } from '../../domain/errors.ts';
import {
  READ_TOOL_NAME,
  ReadFromScratchpadInput,
  WRITE_TOOL_NAME,
  WriteToScratchpadInput,
} from '../../domain/notes-input.ts';
import { OperationToolInput } from '../../domain/operation-input.ts';
import { OperationToolResult } from '../../domain/operation-output.ts';
import { UpdateScratchpadInput } from '../../domain/scratchpad-input.ts';
import { OPERATION_TOOL_NAME } from '../../tools/operation-tool.ts';
import { UPDATE_SCRATCHPAD_TOOL } from '../../tools/scratchpad-tool.ts';
import { ConversationParams, ExecutionHeader } from '../params.ts';
import { BODY_ERRORS, V1_ERRORS } from './route-errors.ts';
import type { RouteSpec } from './route-spec.ts';

const executionHeader = {
  name: 'X-Opspad-Execution',
  description:
    'An execution_id from POST /v1/conversations/{conversationId}/executions: the notes tools then read and write that execution’s notes (cleared when it ends) instead of the conversation’s.',
  schema: ExecutionHeader,
};

const TOOLS: {
  name: string;
  summary: string;
  input: z.ZodType;
  inputName: string;
  result: z.ZodType;
  resultName: string;
  errors: readonly ErrorCode[];
}[] = [
  {
    name: OPERATION_TOOL_NAME,
    summary: 'Create, advance and manage a bulk operation (one action per call)',
    input: OperationToolInput,
    inputName: 'OperationToolInput',
    result: OperationToolResult,
    resultName: 'OperationToolResult',
    errors: [
      'body_stalled',
      'unknown_item_ids',
      'duplicate_item_ids',
      'too_many_items',
      'not_found',
      'no_active_operation',
      'operation_not_active',
      'operation_finished',
      'items_remaining',
      'nothing_to_retry',
      'items_pruned',
      'too_many_active_operations',
      'conflict',
    ],
  },
  {
    name: WRITE_TOOL_NAME,
    summary: 'Add a note to the notes scratchpad',
    input: WriteToScratchpadInput,
    inputName: 'WriteToScratchpadInput',
    result: WriteNotesResult,
    resultName: 'WriteNotesResult',
    errors: ['not_found', 'execution_ended'],
  },
  {
    name: READ_TOOL_NAME,
    summary: 'Read every note of the notes scratchpad',
    input: ReadFromScratchpadInput,
    inputName: 'ReadFromScratchpadInput',
    result: ReadNotesResult,
    resultName: 'ReadNotesResult',
    errors: ['not_found', 'execution_ended'],
  },
  {
    name: UPDATE_SCRATCHPAD_TOOL,
    summary: 'Add, remove or replace entries of the structured scratchpad',
    input: UpdateScratchpadInput,
    inputName: 'UpdateScratchpadInput',
    result: UpdateScratchpadResult,
    resultName: 'UpdateScratchpadResult',
    errors: ['not_found', 'version_conflict'],
  },
];

/** The tool names the tools endpoint serves, each described as a path of its own. */
export const DOCUMENTED_TOOLS: readonly string[] = TOOLS.map((tool) => tool.name);

const byName: RouteSpec[] = TOOLS.map((tool) => ({
  method: 'post',
  path: `/v1/conversations/:conversationId/tools/${tool.name}`,
  operationId: `call_${tool.name}`,
  summary: tool.summary,
  description: `Runs \`${tool.name}\` in the conversation, the body being the tool's input (as a model's tool call would give it). The organization comes from the API key, the conversation from the path. The input schema is the one \`GET /v1/tools\` gives models.`,
  tag: 'Tools',
  auth: 'apiKey',
  params: ConversationParams,
  headers: [executionHeader],
  body: { name: tool.inputName, schema: tool.input, required: true },
  responses: { 200: { description: 'The tool’s answer.', json: { name: tool.resultName, schema: tool.result } } },
  errors: [...V1_ERRORS, ...BODY_ERRORS, 'unknown_tool', ...tool.errors],
}));

/** The same endpoint by any name, for callers that pass a model's tool call through as it came. */
const anyTool: RouteSpec = {
  method: 'post',
  path: '/v1/conversations/:conversationId/tools/:toolName',
  operationId: 'call_tool',
  summary: 'Run any tool by name (the paths above describe each one)',
  description: `Runs the tool \`toolName\` (${DOCUMENTED_TOOLS.map((name) => `\`${name}\``).join(', ')}) with the body as its input; an unknown name answers 400 \`unknown_tool\` listing the tools.`,
  tag: 'Tools',
  auth: 'apiKey',
  params: ConversationParams.extend({ toolName: z.string().min(1).max(64) }),
  headers: [executionHeader],
  body: {
    name: 'ToolInput',
    schema: z
      .record(z.string(), z.unknown())
      .describe('The tool’s input, as its definition in GET /v1/tools describes it.'),
    required: true,
  },
  responses: {
    200: {
      description: 'The tool’s answer.',
      json: {
        name: 'ToolResult',
        schema: z.union([OperationToolResult, WriteNotesResult, ReadNotesResult, UpdateScratchpadResult]),
      },
    },
  },
  errors: [...V1_ERRORS, ...BODY_ERRORS, 'unknown_tool', ...new Set(TOOLS.flatMap((tool) => tool.errors))],
};

export const TOOL_ROUTES: readonly RouteSpec[] = [...byName, anyTool];
