/**
 * A small assistant loop with opspad as its working memory, for an OpenAI-compatible Chat
 * Completions API (strict function calling) or the Anthropic Messages API (see providers.ts),
 * with opspad over HTTP or through `opspad mcp` (see opspad.ts):
 * - over HTTP, every turn the system prompt ends with opspad's context fragment (open operations
 *   and the recited scratchpad), so the model knows where it is even if it remembers nothing else;
 * - through MCP, the model reads the same fragment with the read_working_memory tool, as a
 *   desktop client's model does;
 * - the model's tools are opspad's plus the app's own (here: searching contacts and sending an
 *   SMS), and each call is executed and answered.
 *
 * Run it: `node --import tsx examples/assistant/run.ts` (see docs/assistants.md).
 */
import type { ModelProvider, ProviderMessage } from './providers.ts';

/** A tool the app itself provides: its definition for the model, and what it does. */
export interface LocalTool {
  name: string;
  description: string;
  /** A JSON Schema object that is valid in OpenAI strict mode (every property required). */
  parameters: Record<string, unknown>;
  run(args: Record<string, unknown>): Promise<unknown>;
}

/** opspad as the loop sees it: its tools, a way to call them, and (over HTTP) the fragment. */
export interface OpspadConnection {
  /** opspad's tools in `provider`'s format. */
  tools(provider: ModelProvider): Promise<unknown[]>;
  names(): Promise<ReadonlySet<string>>;
  call(name: string, args: Record<string, unknown>): Promise<unknown>;
  /** The fragment for the system prompt; null when the model reads it with a tool (MCP). */
  context(): Promise<string | null>;
}

export interface AssistantOptions {
  opspad: OpspadConnection;
  provider: ModelProvider;
  localTools: readonly LocalTool[];
  userMessage: string;
  /**
   * How many recent messages are sent with each request (the rest is forgotten). The window is
   * widened to start at the model's own message, never at a bare tool result.
   */
  historyLimit?: number;
  maxTurns?: number;
}

const INSTRUCTIONS = [
  'You are an assistant that does bulk work for the user.',
  'For any task over more than 5 items, create an operation with manage_assistant_operation, then loop:',
  'progress → do the batch → update, until every item is recorded, then complete.',
].join(' ');
const WITH_FRAGMENT = 'The section below is your working memory, rebuilt every turn: trust it over your recollection.';
const WITH_TOOL =
  'Your earlier messages may be gone: call read_working_memory whenever you are unsure what you were doing, and trust it over your recollection.';

/** Runs the loop until the model answers without calling a tool; returns that answer. */
export async function runAssistant(options: AssistantOptions): Promise<{ answer: string; turns: number }> {
  const { opspad, provider } = options;
  const opspadTools = await opspad.tools(provider);
  const opspadNames = await opspad.names();
  const local = new Map(options.localTools.map((tool) => [tool.name, tool]));
  const tools = [...opspadTools, ...options.localTools.map((tool) => provider.localTool(tool))];
  const history: ProviderMessage[] = [provider.userMessage(options.userMessage)];

  for (let turn = 1; turn <= (options.maxTurns ?? 400); turn++) {
    const fragment = await opspad.context();
    const system =
      fragment === null
        ? `${INSTRUCTIONS} ${WITH_TOOL}`
        : `${INSTRUCTIONS} ${WITH_FRAGMENT}\n\n${fragment || '(no operations, empty scratchpad)'}`;
    const window = provider.window(history, options.historyLimit ?? 20);
    const reply = await provider.complete({ system, messages: window, tools });
    history.push(reply.message);
    if (reply.calls.length === 0) {
      return { answer: reply.text, turns: turn };
    }
    const outputs: unknown[] = [];
    for (const call of reply.calls) {
      if (opspadNames.has(call.name)) {
        // opspad's answer, errors included: a 4xx body tells the model what to fix.
        outputs.push(await opspad.call(call.name, call.args));
      } else {
        const tool = local.get(call.name);
        outputs.push(tool ? await tool.run(call.args) : { error: `no tool named ${call.name}` });
      }
    }
    history.push(...provider.results(reply.calls, outputs));
  }
  throw new Error('the assistant did not finish within maxTurns');
}
