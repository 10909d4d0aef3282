/**
 * The MCP server of `opspad mcp`: opspad's tools, as the running service defines them, and the
 * conversation's context fragment as a resource. Every tool call is forwarded to opspad; an
 * answer with an error status becomes a tool result with `isError` and opspad's error JSON, so
 * the model reads what was wrong and fixes its call.
 *
 * The tools are registered on the low-level server: their input schemas are JSON Schemas from
 * `GET /v1/tools`, passed on as they are (the high-level `registerTool` wants zod schemas).
 */
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import {
  CallToolRequestSchema,
  type CallToolResult,
  ListToolsRequestSchema,
  type Tool,
} from '@modelcontextprotocol/sdk/types.js';
import type { ToolDefinition } from '../tools/definitions.ts';
import { type HttpAnswer, type OpspadHttpClient, OpspadHttpError } from './http-client.ts';

export const CONTEXT_RESOURCE_NAME = 'context';
export const CONTEXT_MIME_TYPE = 'text/markdown';

export function contextResourceUri(conversationId: string): string {
  return `opspad://conversations/${conversationId}/context`;
}

export interface OpspadMcpServerOptions {
  client: OpspadHttpClient;
  conversationId: string;
  /** The definitions served by `GET /v1/tools`. */
  tools: readonly ToolDefinition[];
  version: string;
  /** Diagnostics (never stdout: it carries the protocol). */
  log?: (message: string) => void;
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

export function createOpspadMcpServer(options: OpspadMcpServerOptions): McpServer {
  const { client, conversationId } = options;
  const mcp = new McpServer(
    { name: 'opspad', version: options.version },
    {
      instructions: `opspad is your durable working memory for conversation ${conversationId}: bulk operations (manage_assistant_operation) and scratchpads. Read the context resource (${contextResourceUri(conversationId)}) at the start of every turn: it says which operations are active and how to continue them.`,
    },
  );

  const tools: Tool[] = options.tools.map((tool) => ({
    name: tool.name,
    description: tool.description,
    inputSchema: tool.input_schema as Tool['inputSchema'],
  }));
  mcp.server.registerCapabilities({ tools: {} });
  mcp.server.setRequestHandler(ListToolsRequestSchema, () => ({ tools }));
  mcp.server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
    const { name, arguments: input } = request.params;
    try {
      const answer = await client.callTool(name, input ?? {}, extra.signal);
      if (!answer.ok) {
        options.log?.(`${name}: opspad answered ${answer.status}`);
      }
      return toolResult(answer);
    } catch (error) {
      if (!(error instanceof OpspadHttpError)) {
        throw error;
      }
      options.log?.(error.message);
      return { content: [{ type: 'text', text: error.message }], isError: true };
    }
  });

  mcp.registerResource(
    CONTEXT_RESOURCE_NAME,
    contextResourceUri(conversationId),
    {
      title: 'opspad context',
      description:
        'The working-memory fragment for the tail of the system prompt: active and paused operations with the exact call to continue each, and the recited scratchpad. It changes only when the work does.',
      mimeType: CONTEXT_MIME_TYPE,
    },
    async (uri, extra) => ({
      contents: [{ uri: uri.href, mimeType: CONTEXT_MIME_TYPE, text: await client.contextText(extra.signal) }],
    }),
  );
  return mcp;
}
