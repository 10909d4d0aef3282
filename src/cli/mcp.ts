/**
 * `opspad mcp`: an MCP server over stdio, talking to opspad over HTTP (see src/mcp/session.ts).
 * The API key comes from OPSPAD_API_KEY or a file (--key-file): `--key` on the command line
 * is shown to every user of the machine by `ps`, so it still works but is warned about.
 */
import { readFileSync } from 'node:fs';
import { stdoutLogSink, writeStderr } from '../log-sink.ts';
import { serveMcpOverStdio } from '../mcp/stdio.ts';
import { CommandError, UsageError } from './failure.ts';
import type { McpOptions } from './program.ts';
import { settingsFor } from './settings.ts';

/** How long `opspad mcp` may live once its session has ended. */
const MCP_EXIT_WITHIN_MS = 1000;

/** The key in `path`: its first line, trimmed. */
function keyFromFile(path: string): string {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new CommandError(
      `--key-file ${path} could not be read (${(error as NodeJS.ErrnoException).code ?? String(error)})`,
      'Give the path of a file holding the API key, readable by this user',
    );
  }
  return text.split(/\r?\n/, 1)[0]?.trim() ?? '';
}

/** The API key: --key-file, else --key (warned about), else OPSPAD_API_KEY. */
function apiKeyOf(options: McpOptions, fromEnvironment: string | undefined): string {
  if (options.key !== undefined && options.keyFile !== undefined) {
    throw new UsageError('--key and --key-file are both given', 'Give one: --key-file, or OPSPAD_API_KEY');
  }
  if (options.keyFile !== undefined) {
    return keyFromFile(options.keyFile);
  }
  if (options.key !== undefined) {
    writeStderr(
      "opspad mcp: --key puts the API key in the process list, where every user of this machine can read it. Set OPSPAD_API_KEY in the MCP client's configuration, or use --key-file <path>.\n",
    );
    return options.key;
  }
  return fromEnvironment ?? '';
}

export async function mcp(options: McpOptions): Promise<number> {
  const config = settingsFor('mcp');
  // A missing key is reported to the model on each call (after initialize), not by exiting.
  const apiKey = apiKeyOf(options, config.OPSPAD_API_KEY);
  const baseUrl = options.url ?? config.OPSPAD_URL ?? `http://${config.HOST}:${config.PORT}`;
  await serveMcpOverStdio({ baseUrl, apiKey, conversationId: options.conversation });
  // The session is over: a call opspad has not answered yet, or a keep-alive socket, must not
  // keep the process alive. The last answers get what is left of a second to reach the client.
  await stdoutLogSink().flush(MCP_EXIT_WITHIN_MS);
  return process.exit(0);
}
