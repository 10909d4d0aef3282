/**
 * A small assistant loop against an OpenAI-compatible chat completions API, with opspad as its
 * working memory:
 * - every turn, the system prompt ends with opspad's context fragment (open operations and the
 *   recited scratchpad), so the model knows where it is even if it remembers nothing else;
 * - the model's tools are opspad's (from `GET /v1/tools?format=openai`) plus the app's own
 *   (here: searching contacts and sending an SMS), and each call is executed and answered.
 *
 * Run it: `node --import tsx examples/assistant/run.ts` (see README.md, "An assistant example").
 */

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant' | 'tool';
  content: string | null;
  tool_calls?: ToolCall[];
  tool_call_id?: string;
}

export interface ToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

/** A tool the app itself provides: its definition for the model, and what it does. */
export interface LocalTool {
  definition: {
    type: 'function';
    function: { name: string; description: string; parameters: Record<string, unknown> };
  };
  run(args: Record<string, unknown>): Promise<unknown>;
}

export interface AssistantOptions {
  opspad: { url: string; apiKey: string; conversationId: string };
  llm: { baseUrl: string; apiKey?: string; model: string };
  localTools: readonly LocalTool[];
  userMessage: string;
  /** How many recent messages are sent with each request (the rest is forgotten). */
  historyLimit?: number;
  maxTurns?: number;
}

const INSTRUCTIONS = [
  'You are an assistant that does bulk work for the user.',
  'For any task over more than 5 items, create an operation with manage_assistant_operation, then loop:',
  'progress → do the batch → update, until every item is recorded, then complete.',
  'The section below is your working memory, rebuilt every turn: trust it over your recollection.',
].join(' ');

async function json<T>(response: Response): Promise<T> {
  const text = await response.text();
  if (!response.ok) {
    throw new Error(`${response.url} answered ${response.status}: ${text.slice(0, 500)}`);
  }
  return JSON.parse(text) as T;
}

/** Runs the loop until the model answers without calling a tool; returns that answer. */
export async function runAssistant(options: AssistantOptions): Promise<{ answer: string; turns: number }> {
  const { opspad, llm } = options;
  const opspadHeaders = { authorization: `Bearer ${opspad.apiKey}`, 'content-type': 'application/json' };
  const { tools: opspadTools } = await json<{ tools: LocalTool['definition'][] }>(
    await fetch(`${opspad.url}/v1/tools?format=openai`, { headers: opspadHeaders }),
  );
  const opspadToolNames = new Set(opspadTools.map((tool) => tool.function.name));
  const local = new Map(options.localTools.map((tool) => [tool.definition.function.name, tool]));
  const history: ChatMessage[] = [{ role: 'user', content: options.userMessage }];

  for (let turn = 1; turn <= (options.maxTurns ?? 200); turn++) {
    const context = await json<{ text: string }>(
      await fetch(`${opspad.url}/v1/conversations/${opspad.conversationId}/context`, { headers: opspadHeaders }),
    );
    const messages: ChatMessage[] = [
      { role: 'system', content: `${INSTRUCTIONS}\n\n${context.text || '(no operations, empty scratchpad)'}` },
      ...history.slice(-(options.historyLimit ?? 20)),
    ];
    const completion = await json<{ choices: { message: ChatMessage }[] }>(
      await fetch(`${llm.baseUrl.replace(/\/$/, '')}/chat/completions`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          ...(llm.apiKey ? { authorization: `Bearer ${llm.apiKey}` } : {}),
        },
        body: JSON.stringify({
          model: llm.model,
          messages,
          tools: [...opspadTools, ...options.localTools.map((tool) => tool.definition)],
        }),
      }),
    );
    const reply = completion.choices[0]?.message;
    if (!reply) {
      throw new Error('the model answered with no choice');
    }
    history.push(reply);
    if (!reply.tool_calls || reply.tool_calls.length === 0) {
      return { answer: reply.content ?? '', turns: turn };
    }
    for (const call of reply.tool_calls) {
      const args = JSON.parse(call.function.arguments || '{}') as Record<string, unknown>;
      let result: unknown;
      if (opspadToolNames.has(call.function.name)) {
        // opspad's answer, errors included: a 4xx body tells the model what to fix.
        const response = await fetch(
          `${opspad.url}/v1/conversations/${opspad.conversationId}/tools/${call.function.name}`,
          { method: 'POST', headers: opspadHeaders, body: JSON.stringify(args) },
        );
        result = await response.json();
      } else {
        const tool = local.get(call.function.name);
        result = tool ? await tool.run(args) : { error: `no tool named ${call.function.name}` };
      }
      history.push({ role: 'tool', tool_call_id: call.id, content: JSON.stringify(result) });
    }
  }
  throw new Error('the assistant did not finish within maxTurns');
}
