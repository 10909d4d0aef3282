/**
 * The SDK's own Streamable HTTP client against a running opspad's `/mcp`, with a Bearer
 * credential (an API key or an OAuth access token), and what its tool calls answered.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import {
  StreamableHTTPClientTransport,
  type StreamableHTTPClientTransportOptions,
} from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';

export interface McpHttpSession {
  client: Client;
  transport: StreamableHTTPClientTransport;
  /** The session id the server gave at initialize. */
  sessionId: string;
  /** A tool call: its result, its text, and the text parsed when it is JSON. */
  call(
    name: string,
    args?: Record<string, unknown>,
  ): Promise<{ result: CallToolResult; text: string; json: Record<string, unknown> }>;
  close(): Promise<void>;
}

export async function connectMcp(
  url: string,
  token: string,
  options: {
    sessionId?: string;
    headers?: Record<string, string>;
  } & Partial<StreamableHTTPClientTransportOptions> = {},
): Promise<McpHttpSession> {
  const { headers, ...transportOptions } = options;
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    ...transportOptions,
    requestInit: { headers: { authorization: `Bearer ${token}`, ...headers } },
  });
  const client = new Client({ name: 'opspad-mcp-http-test', version: '0.0.0' });
  if (options.sessionId) {
    // Resuming: the client skips initialize and speaks in the given session.
    await client.connect(transport);
  } else {
    await client.connect(transport, { timeout: 30_000 });
  }
  const sessionId = transport.sessionId;
  if (!sessionId) {
    throw new Error('the server gave no Mcp-Session-Id');
  }
  return {
    client,
    transport,
    sessionId,
    async call(name, args = {}) {
      const result = (await client.callTool({ name, arguments: args })) as CallToolResult;
      const first = result.content[0];
      const text = first?.type === 'text' ? first.text : '';
      let json: Record<string, unknown> = {};
      try {
        json = JSON.parse(text) as Record<string, unknown>;
      } catch {
        // not JSON: read_working_memory, or a message
      }
      return { result, text, json };
    },
    close: () => client.close(),
  };
}
