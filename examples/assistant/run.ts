/**
 * Runs the example assistant against a real model: an OpenAI-compatible API and a running opspad.
 *
 *   OPSPAD_URL=http://127.0.0.1:3000 OPSPAD_API_KEY=opk_… \
 *   LLM_BASE_URL=https://api.openai.com/v1 LLM_API_KEY=sk-… LLM_MODEL=gpt-4o-mini \
 *   node --import tsx examples/assistant/run.ts "Send a follow-up SMS to every contact tagged Lead"
 *
 * The contacts and the SMS provider are simulated here (100 Leads; every 12th has no phone).
 */
import { randomUUID } from 'node:crypto';
import { runAssistant } from './assistant.ts';
import { contactTools } from './contacts.ts';

const env = (name: string, fallback?: string): string => {
  const value = process.env[name] ?? fallback;
  if (!value) {
    throw new Error(`set ${name}`);
  }
  return value;
};

const result = await runAssistant({
  opspad: {
    url: env('OPSPAD_URL', 'http://127.0.0.1:3000'),
    apiKey: env('OPSPAD_API_KEY'),
    conversationId: randomUUID(),
  },
  llm: { baseUrl: env('LLM_BASE_URL'), apiKey: process.env.LLM_API_KEY, model: env('LLM_MODEL', 'gpt-4o-mini') },
  localTools: contactTools(100).tools,
  userMessage: process.argv[2] ?? 'Send a follow-up SMS to every contact tagged Lead',
  historyLimit: 4,
});
process.stdout.write(`${result.answer}\n(${result.turns} turns)\n`);
