/**
 * The MCP server of `opspad mcp`: opspad's tools, as the running service defines them, plus
 * `read_working_memory`, the context fragment as a tool result. A model only reads what tools
 * return (resources are attached by the application or the user, and MCP prompts are chosen by
 * the user), so a model that kept nothing but the tool list finds its open work and the next call
 * through this one tool. The fragment is also the resource `opspad://context`, for applications
 * that attach it.
 *
 * Every other tool call is forwarded to opspad, into the conversation session.ts chooses; an
 * answer with an error status becomes a tool result with `isError` and opspad's error JSON, so
 * the model reads what was wrong and fixes its call. An unknown tool is a JSON-RPC error
 * (-32602). opspad unreachable or refusing the key does not stop the server: `initialize` and
 * `tools/list` still answer (with the definitions built in), and each call answers `isError`
 * saying what to fix. Only the capabilities the server honours are advertised: no list-changed
 * or resource-update notifications are ever sent.
 *
 * The tools are registered on the low-level server: their input schemas are JSON Schemas from
 * `GET /v1/tools`, passed on as they are (the high-level `registerTool` wants zod schemas).
 */
import type { CreateTaskResult } from '@modelcontextprotocol/sdk/experimental/tasks/types.js';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import {
  type CallToolRequest,
  CallToolRequestSchema,
  type CallToolResult,
  ErrorCode,
  ListResourcesRequestSchema,
  ListToolsRequestSchema,
  McpError,
  ReadResourceRequestSchema,
  type Tool,
} from '@modelcontextprotocol/sdk/types.js';
import { type ToolDefinition, toolDefinitions } from '../tools/definitions.ts';
import {
  EMPTY_WORKING_MEMORY,
  WORKING_MEMORY_TOOL_DESCRIPTION,
  WORKING_MEMORY_TOOL_NAME,
} from '../tools/working-memory-tool.ts';
import { type AwaitingOperation, askApproval, canAsk } from './ask-approval.ts';
import { type HttpAnswer, type OpspadHttpClient, OpspadHttpError, sessionProblem } from './http-client.ts';
import {
  OPERATION_APP_MIME_TYPE,
  OPERATION_APP_RESOURCE_META,
  OPERATION_APP_TOOL_META,
  OPERATION_APP_URI,
  operationAppHtml,
} from './operation-app.ts';
import { type ConversationRouter, OPERATION_TOOL } from './session.ts';
import { createOperationTaskStore } from './task-store.ts';

export const CONTEXT_TOOL_NAME = WORKING_MEMORY_TOOL_NAME;
export const CONTEXT_RESOURCE_URI = 'opspad://context';
export const CONTEXT_MIME_TYPE = 'text/markdown';
/** How long `tools/list` waits for opspad's definitions before serving the built-in ones. */
const DEFINITIONS_TIMEOUT_MS = 5000;

const CONTEXT_TOOL_DESCRIPTION = WORKING_MEMORY_TOOL_DESCRIPTION;
const EMPTY_CONTEXT = EMPTY_WORKING_MEMORY;

const INSTRUCTIONS = [
  'opspad is your durable working memory for bulk work (operations over many items, done in batches) and your notes.',
  `At the start of a conversation, and whenever you are unsure what you were doing, call ${CONTEXT_TOOL_NAME}: it lists your open operations with their ids and the next action, and your scratchpad.`,
  'Pass operation_id on every manage_assistant_operation call but create. When an operation was paused by an operator, ask the user before resuming it.',
].join(' ');

export interface OpspadMcpServerOptions {
  client: OpspadHttpClient;
  router: ConversationRouter;
  version: string;
  /** Diagnostics (never stdout: it carries the protocol). */
  log?: (message: string) => void;
  /**
   * Whether to ask the user (elicitation) before an operation above the approval threshold
   * starts; default true. `/mcp` passes false: its per-request servers cannot wait for a reply
   * that arrives as another request.
   */
  askApproval?: boolean;
}

function textResult(text: string, isError = false): CallToolResult {
  return { content: [{ type: 'text', text }], ...(isError ? { isError: true } : {}) };
}

function toolResult(answer: HttpAnswer): CallToolResult {
  const body = answer.body;
  const structured =
    typeof body === 'object' && body !== null && !Array.isArray(body) ? (body as Record<string, unknown>) : undefined;
  return {
    content: [{ type: 'text', text: typeof body === 'string' ? body : JSON.stringify(body) }],
    ...(structured ? { structuredContent: structured } : {}),
    ...(answer.ok ? {} : { isError: true }),
  };
}

const CONTEXT_TOOL: Tool = {
  name: CONTEXT_TOOL_NAME,
  description: CONTEXT_TOOL_DESCRIPTION,
  inputSchema: { type: 'object', properties: {}, additionalProperties: false },
  annotations: { readOnlyHint: true, openWorldHint: false },
};

function asTool(definition: ToolDefinition): Tool {
  return {
    name: definition.name,
    description: definition.description,
    inputSchema: definition.input_schema as Tool['inputSchema'],
    // Hosts that render MCP Apps show the operation's live progress beside each result.
    // A create can be run as an MCP Task: the task is the operation (task-store.ts).
    ...(definition.name === OPERATION_TOOL
      ? { _meta: OPERATION_APP_TOOL_META, execution: { taskSupport: 'optional' as const } }
      : {}),
  };
}

export function createOpspadMcpServer(options: OpspadMcpServerOptions): Server {
  const { client, router, log } = options;
  const taskStore = createOperationTaskStore({ client, router });
  const server = new Server(
    { name: 'opspad', version: options.version },
    {
      capabilities: {
        tools: {},
        resources: {},
        tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } },
      },
      instructions: INSTRUCTIONS,
      taskStore,
    },
  );

  // opspad's own definitions once it answers; the built-in ones (same package) until then.
  let fetched: ToolDefinition[] | undefined;
  const definitions = async (): Promise<ToolDefinition[]> => {
    if (fetched) {
      return fetched;
    }
    try {
      fetched = await client.listTools(AbortSignal.timeout(DEFINITIONS_TIMEOUT_MS));
      return fetched;
    } catch (error) {
      log?.(`serving the built-in tool definitions: ${error instanceof Error ? error.message : String(error)}`);
      return toolDefinitions();
    }
  };

  const contextText = async (signal?: AbortSignal): Promise<string> => {
    const context = await client.context(router.home, { others: true }, signal);
    return context.text || EMPTY_CONTEXT;
  };

  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: [...(await definitions()).map(asTool), CONTEXT_TOOL],
  }));

  /** The create's answer after the user was asked (ask-approval.ts): with their decision in it. */
  const asked = async (op: AwaitingOperation, created: HttpAnswer, signal?: AbortSignal): Promise<CallToolResult> => {
    const decision = await askApproval(server, op, signal);
    if (!decision) {
      return toolResult(created);
    }
    const decided = await client.decideApproval(op.operation_id, decision, signal);
    if (!decided.ok) {
      log?.(`recording the user's ${decision} failed with ${decided.status}`);
      return toolResult(decided);
    }
    const status = (decided.body as { status?: unknown }).status;
    const user = decision === 'approve' ? 'The user approved it: it runs.' : 'The user declined: it was cancelled.';
    return toolResult({ ...created, body: { ...(created.body as object), status, approval: user } });
  };

  /**
   * One tool call, and the operation it created (a `create` that succeeded). A create that
   * awaits approval asks the user first (`ask: 'now'`), or hands the question back (`'later'`:
   * a task answers at once, and reads `input_required` while the question is open).
   */
  const runTool = async (
    name: string,
    input: unknown,
    signal: AbortSignal,
    ask: 'now' | 'later' = 'now',
  ): Promise<{ result: CallToolResult; created?: string; question?: () => Promise<CallToolResult> }> => {
    const names = [...(await definitions()).map((definition) => definition.name), CONTEXT_TOOL_NAME];
    if (!names.includes(name)) {
      throw new McpError(ErrorCode.InvalidParams, `Unknown tool: ${name}. The tools are: ${names.join(', ')}.`);
    }
    try {
      if (name === CONTEXT_TOOL_NAME) {
        return { result: textResult(await contextText(signal)) };
      }
      const call = await router.route(name, input ?? {}, signal);
      const answer = await client.callTool(call.conversationId, name, call.input, signal);
      const problem = sessionProblem(client.baseUrl, answer, name);
      if (problem) {
        log?.(problem.message);
        return { result: textResult(problem.message, true) };
      }
      if (!answer.ok) {
        log?.(`${name}: opspad answered ${answer.status}`);
        return { result: toolResult(answer) };
      }
      await router.answered(name, call, answer.body);
      const body = answer.body as { operation_id?: unknown; status?: unknown } | null;
      // A create and a retry_failed each make an operation: both may await approval, and both
      // called as a task answer that operation's task.
      const action = (input as { action?: unknown } | undefined)?.action;
      const makes = name === OPERATION_TOOL && (action === 'create' || action === 'retry_failed');
      const created = makes && typeof body?.operation_id === 'string' ? body.operation_id : undefined;
      if (created && body?.status === 'awaiting_approval' && options.askApproval !== false && canAsk(server)) {
        const op = answer.body as AwaitingOperation;
        if (ask === 'later') {
          return { result: toolResult(answer), created, question: () => asked(op, answer) };
        }
        return { result: await asked(op, answer, signal), created };
      }
      return { result: toolResult(answer), ...(created ? { created } : {}) };
    } catch (error) {
      if (!(error instanceof OpspadHttpError)) {
        throw error;
      }
      log?.(error.message);
      return { result: textResult(error.message, true) };
    }
  };

  /**
   * A call made as a task: a `create` answers the operation's task; any other call answers at
   * once, and its task holds that answer.
   */
  const runAsTask = async (request: CallToolRequest, extra: { signal: AbortSignal }): Promise<CreateTaskResult> => {
    const { name, arguments: input } = request.params;
    const { result, created, question } = await runTool(name, input, extra.signal, 'later');
    const operationTask = created ? await taskStore.operationTask(created, extra.signal) : null;
    // Asked once the task is answered; the answer moves the task on (or leaves it waiting).
    question?.().catch((error: unknown) => log?.(`asking the user failed: ${String(error)}`));
    return { task: operationTask ?? taskStore.answerTask(result) };
  };

  server.setRequestHandler(
    CallToolRequestSchema,
    async (request, extra): Promise<CallToolResult | CreateTaskResult> => {
      if (request.params.task) {
        return runAsTask(request, extra);
      }
      return (await runTool(request.params.name, request.params.arguments, extra.signal)).result;
    },
  );

  server.setRequestHandler(ListResourcesRequestSchema, () => ({
    resources: [
      {
        uri: CONTEXT_RESOURCE_URI,
        name: 'context',
        title: 'opspad working memory',
        description:
          'What read_working_memory returns: open operations with the next action for each, and the recited scratchpad. It changes only when the work does.',
        mimeType: CONTEXT_MIME_TYPE,
      },
      {
        uri: OPERATION_APP_URI,
        name: 'operation',
        title: 'opspad operation',
        description:
          "An operation's live progress (counts, pace, failures) with pause, resume and cancel: an MCP App shown beside the operation tool's results.",
        mimeType: OPERATION_APP_MIME_TYPE,
        _meta: OPERATION_APP_RESOURCE_META,
      },
    ],
  }));

  server.setRequestHandler(ReadResourceRequestSchema, async (request, extra) => {
    if (request.params.uri === OPERATION_APP_URI) {
      return {
        contents: [
          {
            uri: OPERATION_APP_URI,
            mimeType: OPERATION_APP_MIME_TYPE,
            text: operationAppHtml(),
            _meta: OPERATION_APP_RESOURCE_META,
          },
        ],
      };
    }
    if (request.params.uri !== CONTEXT_RESOURCE_URI) {
      throw new McpError(
        ErrorCode.InvalidParams,
        `Unknown resource: ${request.params.uri}. The resources are ${CONTEXT_RESOURCE_URI} and ${OPERATION_APP_URI}.`,
      );
    }
    try {
      return {
        contents: [{ uri: CONTEXT_RESOURCE_URI, mimeType: CONTEXT_MIME_TYPE, text: await contextText(extra.signal) }],
      };
    } catch (error) {
      if (error instanceof OpspadHttpError) {
        throw new McpError(ErrorCode.InternalError, error.message);
      }
      throw error;
    }
  });
  return server;
}
