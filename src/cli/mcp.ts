/** `opspad mcp`: an MCP server over stdio, talking to opspad over HTTP (see src/mcp/session.ts). */
import { stdoutLogSink } from '../log-sink.ts';
import { serveMcpOverStdio } from '../mcp/stdio.ts';
import type { McpOptions } from './program.ts';
import { settingsFor } from './settings.ts';

/** How long `opspad mcp` may live once its session has ended. */
const MCP_EXIT_WITHIN_MS = 1000;

export async function mcp(options: McpOptions): Promise<number> {
  const config = settingsFor('mcp');
  // A missing key is reported to the model on each call (after initialize), not by exiting.
  const apiKey = options.key ?? config.OPSPAD_API_KEY ?? '';
  const baseUrl = options.url ?? config.OPSPAD_URL ?? `http://${config.HOST}:${config.PORT}`;
  await serveMcpOverStdio({ baseUrl, apiKey, conversationId: options.conversation });
  // The session is over: a call opspad has not answered yet, or a keep-alive socket, must not
  // keep the process alive. The last answers get what is left of a second to reach the client.
  await stdoutLogSink().flush(MCP_EXIT_WITHIN_MS);
  return process.exit(0);
}
