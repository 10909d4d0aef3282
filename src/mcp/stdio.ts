/**
 * `opspad mcp`: serves the MCP server over this process's stdin and stdout until the client
 * closes stdin, its end of stdout goes away (EPIPE), or a signal arrives. Stdout carries the
 * protocol only; diagnostics go to stderr. Ending the session aborts the calls still in flight;
 * the command then exits within a second, whatever is still open.
 */
import { createRequire } from 'node:module';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { createOpspadHttpClient } from './http-client.ts';
import { createOpspadMcpServer } from './server.ts';

export interface McpCommandOptions {
  baseUrl: string;
  apiKey: string;
  conversationId: string;
}

const { version } = createRequire(import.meta.url)('../../package.json') as { version: string };

function log(message: string): void {
  process.stderr.write(`opspad mcp: ${message}\n`);
}

/** Resolves when the session ends; rejects when opspad cannot be reached or refuses the key. */
export async function serveMcpOverStdio(options: McpCommandOptions): Promise<void> {
  const client = createOpspadHttpClient(options);
  // Before speaking MCP: a wrong URL or key is reported now, not as a failure of every call.
  const tools = await client.listTools(AbortSignal.timeout(10_000));
  const mcp = createOpspadMcpServer({ client, conversationId: options.conversationId, tools, version, log });
  const closed = new Promise<void>((resolve) => {
    mcp.server.onclose = resolve;
  });
  const close = () => void mcp.close();
  // 'end' is EOF; 'close' also covers a stdin destroyed by an error.
  const ends: [NodeJS.EventEmitter, string][] = [
    [process.stdin, 'end'],
    [process.stdin, 'close'],
    [process.stdout, 'error'],
    [process, 'SIGINT'],
    [process, 'SIGTERM'],
  ];
  for (const [emitter, event] of ends) {
    emitter.once(event, close);
  }
  await mcp.connect(new StdioServerTransport());
  log(`serving conversation ${options.conversationId} from ${client.baseUrl} (${tools.length} tools)`);
  await closed;
  for (const [emitter, event] of ends) {
    emitter.off(event, close);
  }
}
