/**
 * A forgetful scripted model as an AI SDK language model: the library's own MockLanguageModelV3
 * (`ai/test`) whose every answer is decided by a {@link FollowUpModel} from the system prompt and
 * the last message of the prompt the AI SDK built, each tool call checked against the schema the
 * SDK sent for it.
 */
import { randomUUID } from 'node:crypto';
import { MockLanguageModelV3 } from 'ai/test';
import { type FollowUpModel, parse, type Seen, validatorFor } from './scripted-models.ts';

type CallOptions = Parameters<MockLanguageModelV3['doGenerate']>[0];
type Message = CallOptions['prompt'][number];

export interface ScriptedAiSdkModel {
  model: MockLanguageModelV3;
  /** Messages (beside the system prompt) of each call, for assertions on what the model was shown. */
  promptSizes: number[];
}

function seenOf(options: CallOptions): Seen {
  const system = options.prompt
    .filter((message): message is Extract<Message, { role: 'system' }> => message.role === 'system')
    .map((message) => message.content)
    .join('\n');
  const last = options.prompt.filter((message) => message.role !== 'system').at(-1);
  const tools = new Set((options.tools ?? []).map((tool) => tool.name));
  if (last?.role === 'tool') {
    return {
      system,
      tools,
      last: {
        kind: 'results',
        results: last.content.flatMap((part) =>
          part.type === 'tool-result'
            ? [
                {
                  name: part.toolName,
                  body:
                    part.output.type === 'json' || part.output.type === 'text' ? parse(part.output.value) : part.output,
                },
              ]
            : [],
        ),
      },
    };
  }
  const text =
    last?.role === 'user' ? last.content.map((part) => (part.type === 'text' ? part.text : '')).join('') : '';
  return { system, tools, last: { kind: 'user', text } };
}

export function scriptedAiSdkModel(decide: FollowUpModel): ScriptedAiSdkModel {
  const promptSizes: number[] = [];
  const model = new MockLanguageModelV3({
    doGenerate: async (options) => {
      promptSizes.push(options.prompt.filter((message) => message.role !== 'system').length);
      const check = validatorFor(
        (options.tools ?? []).flatMap((tool) =>
          tool.type === 'function' ? [{ name: tool.name, schema: tool.inputSchema as Record<string, unknown> }] : [],
        ),
      );
      const decision = decide(seenOf(options));
      const calls = decision.calls ?? [];
      for (const call of calls) {
        check(call.name, call.args);
      }
      const usage = {
        inputTokens: { total: undefined, noCache: undefined, cacheRead: undefined, cacheWrite: undefined },
        outputTokens: { total: undefined, text: undefined, reasoning: undefined },
      };
      if (calls.length > 0) {
        return {
          content: calls.map((call) => ({
            type: 'tool-call' as const,
            toolCallId: `call_${randomUUID()}`,
            toolName: call.name,
            input: JSON.stringify(call.args),
          })),
          finishReason: { unified: 'tool-calls', raw: undefined },
          usage,
          warnings: [],
        };
      }
      return {
        content: [{ type: 'text' as const, text: decision.text ?? '' }],
        finishReason: { unified: 'stop', raw: undefined },
        usage,
        warnings: [],
      };
    },
  });
  return { model, promptSizes };
}
