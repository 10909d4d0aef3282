/**
 * The two model APIs the example speaks, behind one shape:
 * - `openai`: Chat Completions (`POST {baseUrl}/chat/completions`), opspad's tools in the
 *   `?format=openai` strict form, the app's tools strict too;
 * - `anthropic`: Messages (`POST {baseUrl}/v1/messages`, `x-api-key`), tools as
 *   `{name, description, input_schema}`.
 */
import type { LocalTool } from './assistant.ts';

export interface ToolCall {
  id: string;
  name: string;
  args: Record<string, unknown>;
}

/** A message in the provider's own wire format. */
export type ProviderMessage = Record<string, unknown>;

export interface ModelProvider {
  readonly kind: 'openai' | 'anthropic';
  userMessage(text: string): ProviderMessage;
  localTool(tool: LocalTool): unknown;
  /** The last `limit` messages, widened so the first is never a bare tool result. */
  window(history: readonly ProviderMessage[], limit: number): ProviderMessage[];
  complete(request: {
    system: string;
    messages: ProviderMessage[];
    tools: unknown[];
  }): Promise<{ message: ProviderMessage; text: string; calls: ToolCall[] }>;
  /** The message(s) that answer `calls` with `outputs`. */
  results(calls: readonly ToolCall[], outputs: readonly unknown[]): ProviderMessage[];
}

export interface ProviderOptions {
  baseUrl: string;
  apiKey?: string;
  model: string;
}

async function post<T>(url: string, headers: Record<string, string>, body: unknown): Promise<T> {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
  const text = await response.text();
  if (!response.ok) {
    throw new Error(`${url} answered ${response.status}: ${text.slice(0, 500)}`);
  }
  return JSON.parse(text) as T;
}

function widen(history: readonly ProviderMessage[], limit: number, isResult: (m: ProviderMessage) => boolean) {
  let start = Math.max(0, history.length - limit);
  while (start > 0 && isResult(history[start] as ProviderMessage)) {
    start--;
  }
  return history.slice(start);
}

export function openAiProvider(options: ProviderOptions): ModelProvider {
  return {
    kind: 'openai',
    userMessage: (text) => ({ role: 'user', content: text }),
    localTool: (tool) => ({
      type: 'function',
      function: { name: tool.name, description: tool.description, parameters: tool.parameters, strict: true },
    }),
    window: (history, limit) => widen(history, limit, (message) => message.role === 'tool'),
    async complete({ system, messages, tools }) {
      const completion = await post<{ choices: { message: ProviderMessage }[] }>(
        `${options.baseUrl.replace(/\/$/, '')}/chat/completions`,
        options.apiKey ? { authorization: `Bearer ${options.apiKey}` } : {},
        { model: options.model, messages: [{ role: 'system', content: system }, ...messages], tools },
      );
      const message = completion.choices[0]?.message;
      if (!message) {
        throw new Error('the model answered with no choice');
      }
      const toolCalls = (message.tool_calls ?? []) as { id: string; function: { name: string; arguments: string } }[];
      return {
        message,
        text: typeof message.content === 'string' ? message.content : '',
        calls: toolCalls.map((call) => ({
          id: call.id,
          name: call.function.name,
          args: JSON.parse(call.function.arguments || '{}') as Record<string, unknown>,
        })),
      };
    },
    results: (calls, outputs) =>
      calls.map((call, i) => ({ role: 'tool', tool_call_id: call.id, content: JSON.stringify(outputs[i]) })),
  };
}

interface AnthropicBlock {
  type: string;
  text?: string;
  id?: string;
  name?: string;
  input?: Record<string, unknown>;
}

export function anthropicProvider(options: ProviderOptions): ModelProvider {
  const isResults = (message: ProviderMessage) =>
    message.role === 'user' &&
    Array.isArray(message.content) &&
    (message.content as AnthropicBlock[]).some((block) => block.type === 'tool_result');
  return {
    kind: 'anthropic',
    userMessage: (text) => ({ role: 'user', content: text }),
    localTool: (tool) => ({ name: tool.name, description: tool.description, input_schema: tool.parameters }),
    window: (history, limit) => widen(history, limit, isResults),
    async complete({ system, messages, tools }) {
      const reply = await post<{ content: AnthropicBlock[] }>(
        `${options.baseUrl.replace(/\/$/, '')}/v1/messages`,
        { 'anthropic-version': '2023-06-01', ...(options.apiKey ? { 'x-api-key': options.apiKey } : {}) },
        { model: options.model, max_tokens: 4096, system, messages, tools },
      );
      const content = reply.content ?? [];
      return {
        message: { role: 'assistant', content },
        text: content
          .filter((block) => block.type === 'text')
          .map((block) => block.text ?? '')
          .join(''),
        calls: content
          .filter((block) => block.type === 'tool_use')
          .map((block) => ({ id: block.id as string, name: block.name as string, args: block.input ?? {} })),
      };
    },
    // All results of one turn go back in one user message.
    results: (calls, outputs) => [
      {
        role: 'user',
        content: calls.map((call, i) => {
          const output = outputs[i];
          return {
            type: 'tool_result',
            tool_use_id: call.id,
            content: typeof output === 'string' ? output : JSON.stringify(output),
          };
        }),
      },
    ],
  };
}
