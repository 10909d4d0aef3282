/**
 * Context editing and compaction on Anthropic's Messages API, with opspad as the memory that
 * survives both (docs/assistants.md#context-editing-and-compaction).
 *
 * - Context editing (`clear_tool_uses_20250919`) clears old tool results once the prompt grows:
 *   the batches a model sent, the contacts it searched. `read_working_memory` is in
 *   `exclude_tools`, so its latest answer — the open operations, the next call, the scratchpad —
 *   is never among them.
 * - Compaction (`compact_20260112`) replaces earlier turns with a summary. A summary keeps the
 *   gist, not the operation ids and counts, so the loop pauses after each compaction
 *   (`pause_after_compaction`) and hands the model its working memory, read from opspad, before
 *   it goes on.
 *
 * Run against a running opspad and Anthropic's API (the contacts and SMS are simulated):
 *
 *     OPSPAD_URL=http://127.0.0.1:3000 OPSPAD_API_KEY=opk_… ANTHROPIC_API_KEY=sk-ant-… \
 *     node --import tsx examples/context-editing/anthropic.ts "Send a follow-up SMS to every contact tagged Lead"
 *
 * An application imports `opspad/client`; the example imports the sources it is built from.
 */
import { randomUUID } from 'node:crypto';
import Anthropic from '@anthropic-ai/sdk';
import { createClient, type OpspadClient, OpspadError } from '../../src/client/index.ts';
import { contactTools } from '../assistant/contacts.ts';

type MessageParam = Anthropic.Beta.Messages.BetaMessageParam;
type Tool = Anthropic.Beta.Messages.BetaTool;
type ToolResult = Anthropic.Beta.Messages.BetaToolResultBlockParam;

export const WORKING_MEMORY_TOOL = 'read_working_memory';

/** The betas both edits need. */
export const BETAS: Anthropic.Beta.AnthropicBeta[] = ['context-management-2025-06-27', 'compact-2026-01-12'];

export const CONTEXT_MANAGEMENT: Anthropic.Beta.Messages.BetaContextManagementConfig = {
  edits: [
    {
      type: 'clear_tool_uses_20250919',
      // Past 40k input tokens, clear the oldest tool results but the last 4, 10k tokens at least
      // (clearing less is not worth the cache it invalidates).
      trigger: { type: 'input_tokens', value: 40_000 },
      keep: { type: 'tool_uses', value: 4 },
      clear_at_least: { type: 'input_tokens', value: 10_000 },
      exclude_tools: [WORKING_MEMORY_TOOL],
    },
    {
      type: 'compact_20260112',
      trigger: { type: 'input_tokens', value: 150_000 },
      pause_after_compaction: true,
      instructions: 'Keep the task and what the user asked for; operation ids and counts are in read_working_memory.',
    },
  ],
};

const INSTRUCTIONS = [
  'You do bulk work for the user with manage_assistant_operation: create an operation with every item id, then progress, process the batch, update, until it says to complete.',
  `Call ${WORKING_MEMORY_TOOL} first, and whenever you are unsure where you are: old tool results may have been cleared or summarized; your working memory is not.`,
].join(' ');

/** The working memory as opspad renders it (the context fragment). */
async function workingMemory(opspad: OpspadClient, conversationId: string): Promise<string> {
  const { text } = await opspad.context.get(conversationId);
  return text || 'Nothing open: no bulk operation in progress and an empty scratchpad.';
}

/** opspad's tools in Anthropic's format, read_working_memory, and the app's own. */
async function toolsFor(opspad: OpspadClient, own: readonly Tool[]): Promise<Tool[]> {
  const { tools } = await opspad.tools.list({ format: 'anthropic' });
  const listed = tools.flatMap((tool) =>
    'input_schema' in tool
      ? [{ name: tool.name, description: tool.description, input_schema: tool.input_schema as Tool['input_schema'] }]
      : [],
  );
  const memory: Tool = {
    name: WORKING_MEMORY_TOOL,
    description:
      'Your open bulk operations (ids, progress, the next call) and your scratchpad. Call it whenever you are unsure what you were doing.',
    input_schema: { type: 'object', properties: {} },
  };
  return [...listed, memory, ...own];
}

export interface RunOptions {
  anthropic: Anthropic;
  opspad: OpspadClient;
  conversationId: string;
  task: string;
  model: string;
  maxTurns?: number;
}

/** Runs the task to its final answer, with both edits on. */
export async function runWithContextEditing(options: RunOptions): Promise<string> {
  const { anthropic, opspad, conversationId } = options;
  const world = contactTools(100);
  const own = world.tools.map(
    (tool): Tool => ({
      name: tool.name,
      description: tool.description,
      input_schema: tool.parameters as Tool['input_schema'],
    }),
  );
  const tools = await toolsFor(opspad, own);
  const call = async (name: string, input: unknown): Promise<string> => {
    if (name === WORKING_MEMORY_TOOL) {
      return workingMemory(opspad, conversationId);
    }
    const local = world.tools.find((tool) => tool.name === name);
    if (local) {
      return JSON.stringify(await local.run(input as Record<string, unknown>));
    }
    try {
      return JSON.stringify(await opspad.tools.call(conversationId, name as 'manage_assistant_operation', input));
    } catch (error) {
      // A refusal goes back to the model as opspad's error JSON, for it to fix the call.
      if (error instanceof OpspadError && error.status < 500) {
        return JSON.stringify({ error: { code: error.code, message: error.message, details: error.details } });
      }
      throw error;
    }
  };

  const messages: MessageParam[] = [{ role: 'user', content: options.task }];
  for (let turn = 0; turn < (options.maxTurns ?? 200); turn++) {
    const response = await anthropic.beta.messages.create({
      model: options.model,
      max_tokens: 4096,
      betas: BETAS,
      system: INSTRUCTIONS,
      tools,
      messages,
      context_management: CONTEXT_MANAGEMENT,
    });
    // The compaction block, tool uses and text all go back as they came.
    messages.push({ role: 'assistant', content: response.content });
    if (response.stop_reason === 'compaction') {
      // Paused after a compaction: the summary replaced the turns before it, so the model reads
      // its working memory again before it goes on.
      messages.push({
        role: 'user',
        content: `The conversation was summarized. Your working memory now:\n\n${await workingMemory(opspad, conversationId)}\n\nContinue the task.`,
      });
      continue;
    }
    const uses = response.content.filter((block) => block.type === 'tool_use');
    if (response.stop_reason !== 'tool_use' || uses.length === 0) {
      return response.content.flatMap((block) => (block.type === 'text' ? [block.text] : [])).join('\n');
    }
    const results: ToolResult[] = [];
    for (const use of uses) {
      results.push({ type: 'tool_result', tool_use_id: use.id, content: await call(use.name, use.input) });
    }
    messages.push({ role: 'user', content: results });
  }
  throw new Error(`no final answer within ${options.maxTurns ?? 200} turns`);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { OPSPAD_URL, OPSPAD_API_KEY } = process.env;
  if (!OPSPAD_URL || !OPSPAD_API_KEY) {
    throw new Error('set OPSPAD_URL and OPSPAD_API_KEY (and ANTHROPIC_API_KEY)');
  }
  const answer = await runWithContextEditing({
    anthropic: new Anthropic(),
    opspad: createClient({ baseUrl: OPSPAD_URL, apiKey: OPSPAD_API_KEY }),
    conversationId: randomUUID(),
    task: process.argv[2] ?? 'Send a follow-up SMS to every contact tagged Lead',
    model: process.env.ANTHROPIC_MODEL ?? 'claude-sonnet-4-5',
  });
  process.stdout.write(`${answer}\n`);
}
