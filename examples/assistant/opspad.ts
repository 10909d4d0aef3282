/**
 * Two ways the example reaches opspad:
 * - `httpOpspad`: the HTTP API — tools from `GET /v1/tools?format=<provider>`, calls to
 *   `POST /v1/conversations/:id/tools/:name`, the fragment from `GET …/context` every turn;
 * - `mcpOpspad`: an MCP client session with `opspad mcp` — tools from `tools/list`, calls through
 *   `tools/call`, and no fragment in the system prompt: the model calls read_working_memory, as a
 *   desktop client's model does (the MCP schemas are Anthropic's format as they are).
 */
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { OpspadConnection } from './assistant.ts';
import type { ModelProvider } from './providers.ts';

async function json<T>(response: Response): Promise<T> {
  const text = await response.text();
  if (!response.ok) {
    throw new Error(`${response.url} answered ${response.status}: ${text.slice(0, 500)}`);
  }
  return JSON.parse(text) as T;
}

export function httpOpspad(options: { url: string; apiKey: string; conversationId: string }): OpspadConnection {
  const headers = { authorization: `Bearer ${options.apiKey}`, 'content-type': 'application/json' };
  const conversation = `${options.url}/v1/conversations/${options.conversationId}`;
  let names: Set<string> | undefined;
  const connection: OpspadConnection = {
    async tools(provider: ModelProvider) {
      const { tools } = await json<{ tools: { name?: string; function?: { name: string } }[] }>(
        await fetch(`${options.url}/v1/tools?format=${provider.kind}`, { headers }),
      );
      names = new Set(tools.map((tool) => tool.function?.name ?? (tool.name as string)));
      return tools;
    },
    async names() {
      return names ?? new Set();
    },
    async call(name, args) {
      const response = await fetch(`${conversation}/tools/${name}`, {
        method: 'POST',
        headers,
        body: JSON.stringify(args),
      });
      return response.json();
    },
    async context() {
      return (await json<{ text: string }>(await fetch(`${conversation}/context`, { headers }))).text;
    },
  };
  return connection;
}

export function mcpOpspad(client: Client): OpspadConnection {
  let names: Set<string> | undefined;
  return {
    async tools(provider) {
      if (provider.kind !== 'anthropic') {
        throw new Error('through MCP, use the anthropic provider: MCP schemas are not in OpenAI’s strict form');
      }
      const { tools } = await client.listTools();
      names = new Set(tools.map((tool) => tool.name));
      return tools.map((tool) => ({ name: tool.name, description: tool.description, input_schema: tool.inputSchema }));
    },
    async names() {
      return names ?? new Set();
    },
    async call(name, args) {
      const result = await client.callTool({ name, arguments: args });
      const text = (result.content as { type: string; text?: string }[])
        .filter((block) => block.type === 'text')
        .map((block) => block.text ?? '')
        .join('\n');
      try {
        return JSON.parse(text) as unknown;
      } catch {
        return text; // read_working_memory's fragment, or a message saying what to fix
      }
    },
    async context() {
      return null;
    },
  };
}
