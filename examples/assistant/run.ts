/**
 * Runs the example assistant against a real model and a running opspad.
 *
 *   OPSPAD_URL=http://127.0.0.1:3000 OPSPAD_API_KEY=opk_… \
 *   LLM_PROVIDER=openai LLM_BASE_URL=https://api.openai.com/v1 LLM_API_KEY=sk-… LLM_MODEL=gpt-4o-mini \
 *   node --import tsx examples/assistant/run.ts "Send a follow-up SMS to every contact tagged Lead"
 *
 * LLM_PROVIDER=anthropic (LLM_BASE_URL=https://api.anthropic.com) speaks the Messages API; with
 * OPSPAD_VIA_MCP=1 it reaches opspad through `opspad mcp` instead of HTTP, as a desktop client
 * does. The contacts and the SMS provider are simulated here (100 Leads; every 12th has no phone).
 */
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { type OpspadConnection, runAssistant } from './assistant.ts';
import { contactTools } from './contacts.ts';
import { httpOpspad, mcpOpspad } from './opspad.ts';
import { anthropicProvider, openAiProvider } from './providers.ts';

const env = (name: string, fallback?: string): string => {
  const value = process.env[name] ?? fallback;
  if (!value) {
    throw new Error(`set ${name}`);
  }
  return value;
};

const url = env('OPSPAD_URL', 'http://127.0.0.1:3000');
const apiKey = env('OPSPAD_API_KEY');
const kind = env('LLM_PROVIDER', 'openai');
const llm = { baseUrl: env('LLM_BASE_URL'), apiKey: process.env.LLM_API_KEY, model: env('LLM_MODEL', 'gpt-4o-mini') };
const provider = kind === 'anthropic' ? anthropicProvider(llm) : openAiProvider(llm);

let opspad: OpspadConnection;
let client: Client | undefined;
if (process.env.OPSPAD_VIA_MCP === '1') {
  client = new Client({ name: 'opspad-example', version: '0.0.0' });
  await client.connect(
    new StdioClientTransport({
      command: process.execPath,
      args: [fileURLToPath(new URL('../../bin/opspad.js', import.meta.url)), 'mcp'],
      env: { PATH: process.env.PATH ?? '', OPSPAD_URL: url, OPSPAD_API_KEY: apiKey },
    }),
  );
  opspad = mcpOpspad(client);
} else {
  opspad = httpOpspad({ url, apiKey, conversationId: randomUUID() });
}

try {
  const result = await runAssistant({
    opspad,
    provider,
    localTools: contactTools(100).tools,
    userMessage: process.argv[2] ?? 'Send a follow-up SMS to every contact tagged Lead',
    historyLimit: 6,
  });
  process.stdout.write(`${result.answer}\n(${result.turns} turns)\n`);
} finally {
  await client?.close();
}
