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
import { createConversationRouter } from './session.ts';

export interface McpCommandOptions {
  baseUrl: string;
  apiKey: string;
  /** Unset: a conversation of this session's own (see session.ts). */
  conversationId?: string;
}

const { version } = createRequire(import.meta.url)('../../package.json') as { version: string };

function log(message: string): void {
  process.stderr.write(`opspad mcp: ${message}\n`);
}

/**
 * Resolves when the session ends. opspad is not asked anything before the client speaks: a wrong
 * URL or key is reported in the answer to each call (the client would only show "server
 * disconnected" if the process exited before `initialize`).
 */
export async function serveMcpOverStdio(options: McpCommandOptions): Promise<void> {
  const client = createOpspadHttpClient(options);
  const router = createConversationRouter(client, { conversationId: options.conversationId });
  const mcp = createOpspadMcpServer({ client, router, version, log });
  const closed = new Promise<void>((resolve) => {
    mcp.onclose = resolve;
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
  log(
    `serving ${router.mode === 'fixed' ? `conversation ${router.home}` : `a session of its own (conversation ${router.home})`} from ${client.baseUrl}`,
  );
  await closed;
  for (const [emitter, event] of ends) {
    emitter.off(event, close);
  }
}
