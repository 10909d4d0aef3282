/**
 * The tools opspad offers a model, by name, with one `execute` entry point.
 */
import { AppError } from '../domain/errors.ts';
import { OPERATION_ACTIONS } from '../domain/operation-input.ts';
import type { ConversationScope } from '../store/index.ts';
import { ATTR, inSpan } from '../telemetry/spans.ts';
import { type ApprovalDecision, type DecidedOperation, decideApproval } from './approvals.ts';
import { normalizeFlatInput } from './flat-input.ts';
import {
  executeReadFromScratchpad,
  executeWriteToScratchpad,
  type NotesToolDeps,
  READ_TOOL_NAME,
  WRITE_TOOL_NAME,
} from './notes-tools.ts';
import {
  executeOperationTool,
  OPERATION_TOOL_NAME,
  type OperationToolDeps,
  type ToolCallContext,
  type ToolResult,
} from './operation-tool.ts';
import { executeUpdateScratchpad, type ScratchpadToolDeps, UPDATE_SCRATCHPAD_TOOL } from './scratchpad-tool.ts';
import { executeStreamedOperationTool, type StreamedToolBody } from './streamed-create.ts';

export interface ToolRegistry {
  readonly names: readonly string[];
  execute(name: string, input: unknown, ctx: ToolCallContext): Promise<ToolResult>;
  /** The operation tool with a body whose item_ids is read as it arrives (a large create). */
  executeStreamed(name: string, body: StreamedToolBody, ctx: ToolCallContext): Promise<ToolResult>;
  /** A person's approval or rejection of an operation awaiting it (approvals.ts). */
  decideApproval(
    scope: ConversationScope,
    operationId: string,
    decision: ApprovalDecision,
    actor: string,
  ): Promise<DecidedOperation>;
}

export function createToolRegistry(deps: OperationToolDeps & ScratchpadToolDeps & NotesToolDeps): ToolRegistry {
  const tools: Record<string, (input: unknown, ctx: ToolCallContext) => Promise<ToolResult>> = {
    [OPERATION_TOOL_NAME]: (input, ctx) => executeOperationTool(deps, ctx, normalizeFlatInput(input)),
    [WRITE_TOOL_NAME]: (input, ctx) =>
      executeWriteToScratchpad(deps.db, ctx, input, deps.sizeLimits?.noteBytes, deps.notesBounds),
    [READ_TOOL_NAME]: (input, ctx) =>
      executeReadFromScratchpad(deps.db, ctx, input, deps.sizeLimits?.noteBytes, deps.notesBounds),
    [UPDATE_SCRATCHPAD_TOOL]: (input, ctx) => executeUpdateScratchpad(deps, ctx, input),
  };
  const names = Object.keys(tools);
  const unknownTool = (name: string) =>
    new AppError('unknown_tool', `There is no tool "${name}". Tools: ${names.join(', ')}.`, {
      field: 'toolName',
      tools: names,
    });
  return {
    names,
    execute(name, input, ctx) {
      const tool = Object.hasOwn(tools, name) ? tools[name] : undefined;
      if (!tool) {
        throw unknownTool(name);
      }
      return inSpan(
        `tool ${name}`,
        {
          attributes: {
            [ATTR.toolName]: name,
            [ATTR.organizationId]: ctx.scope.organizationId,
            [ATTR.conversationId]: ctx.scope.conversationId,
            ...(actionOf(input) ? { [ATTR.toolAction]: actionOf(input) } : {}),
          },
        },
        async (span) => {
          const result = await tool(input, ctx);
          // Only what the call answered with, after validation: never the tenant's raw input.
          if (typeof result.operation_id === 'string') {
            span.setAttribute(ATTR.operationId, result.operation_id);
          }
          if (typeof result.operation_type === 'string') {
            span.setAttribute(ATTR.operationType, result.operation_type);
          }
          return result;
        },
      );
    },
    executeStreamed(name, body, ctx) {
      if (name !== OPERATION_TOOL_NAME) {
        throw unknownTool(name);
      }
      return executeStreamedOperationTool(deps, ctx, body);
    },
    decideApproval(scope, operationId, decision, actor) {
      return decideApproval(deps, scope, operationId, decision, actor);
    },
  };
}

const KNOWN_ACTIONS: ReadonlySet<string> = new Set(OPERATION_ACTIONS);

/** The operation tool's action, when it is one of the known ones (a span name stays bounded). */
function actionOf(input: unknown): string | undefined {
  const action = input && typeof input === 'object' ? (input as { action?: unknown }).action : undefined;
  return typeof action === 'string' && KNOWN_ACTIONS.has(action) ? action : undefined;
}
