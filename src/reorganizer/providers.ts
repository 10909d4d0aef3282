/**
 * Reorganizers: what rewrites a pad into a compact, cited form. `builtin` is deterministic and
 * needs nothing; `openai` (any OpenAI-compatible chat completions API, with a JSON-schema
 * response format) and `anthropic` (messages API, structured output through a forced tool call)
 * ask a model. Every output is validated by the caller before anything is saved.
 */
import { z } from 'zod';
import { compactPadSteps } from '../domain/compact-pad.ts';
import { type Pad, type PadRef, ReorganizedPad } from '../domain/scratchpad.ts';
import { runInSlices } from './slices.ts';

export interface ReorganizeRequest {
  pad: Pad;
  version: number;
  allowedRefs: readonly PadRef[];
  context: Record<string, unknown>;
  budget: number;
}

export interface Reorganizer {
  readonly name: 'builtin' | 'openai' | 'anthropic';
  /** Returns the proposed pad as untrusted JSON; throws when the call itself fails. */
  reorganize(request: ReorganizeRequest, signal?: AbortSignal): Promise<unknown>;
}

export const builtinReorganizer: Reorganizer = {
  name: 'builtin',
  async reorganize(request) {
    const { pad, dropped } = await runInSlices(compactPadSteps(request.pad, request.version, request.budget));
    return { ...pad, dropped };
  },
};

/** The JSON Schema of a reorganizer's answer, from the same zod schema that validates it. */
export const REORGANIZED_PAD_JSON_SCHEMA = z.toJSONSchema(ReorganizedPad, { io: 'input' }) as Record<string, unknown>;

function excerpt(value: string | null | undefined, limit: number): string {
  const flat = (value ?? '').replace(/\s+/g, ' ').trim();
  return flat.length <= limit ? flat : `${flat.slice(0, limit - 1)}…`;
}

export function reorganizePrompt(request: ReorganizeRequest): string {
  const refs = request.allowedRefs.map((ref) => `- ${ref.id}: ${excerpt(ref.label ?? ref.excerpt, 180)}`).join('\n');
  return [
    'Reorganize this assistant scratchpad (working memory for a conversation).',
    '',
    'Rules:',
    '- Keep only compact notes that help the next turn; merge duplicates; drop stale or speculative entries.',
    '- Promote confirmed observations from open items into facts.',
    '- Cite sources by ref id instead of copying long content.',
    '- Every fact must have a source_ref, and every source_ref must be the id of an entry in refs.',
    '- refs may only contain refs from the allowed list below (copy them as they are).',
    `- The recitation budget is ${request.budget} characters: stay well under it.`,
    '- Answer with JSON matching the schema only.',
    '',
    'Current scratchpad:',
    JSON.stringify(request.pad),
    '',
    'Allowed refs:',
    refs || '- (none)',
    '',
    'Context:',
    JSON.stringify(request.context),
  ].join('\n');
}

export interface LlmOptions {
  baseUrl: string;
  apiKey: string | undefined;
  model: string;
  timeoutMs: number;
}

async function postJson(
  url: string,
  headers: Record<string, string>,
  body: unknown,
  timeoutMs: number,
  signal?: AbortSignal,
) {
  const timeout = AbortSignal.timeout(timeoutMs);
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
    signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
  });
  const text = await response.text();
  if (!response.ok) {
    throw new Error(`HTTP ${response.status} from ${new URL(url).host}: ${text.slice(0, 300)}`);
  }
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new Error(`the model API answered with something that is not JSON: ${text.slice(0, 200)}`);
  }
}

const OpenAiAnswer = z.object({
  choices: z.array(z.object({ message: z.object({ content: z.string().nullable() }) })).min(1),
});

export function openAiReorganizer(options: LlmOptions): Reorganizer {
  return {
    name: 'openai',
    async reorganize(request, signal) {
      const answer = OpenAiAnswer.parse(
        await postJson(
          `${options.baseUrl.replace(/\/$/, '')}/chat/completions`,
          options.apiKey ? { authorization: `Bearer ${options.apiKey}` } : {},
          {
            model: options.model,
            temperature: 0,
            messages: [
              { role: 'system', content: 'You maintain compact, cited working memory for an AI assistant.' },
              { role: 'user', content: reorganizePrompt(request) },
            ],
            response_format: {
              type: 'json_schema',
              json_schema: { name: 'scratchpad', schema: REORGANIZED_PAD_JSON_SCHEMA },
            },
          },
          options.timeoutMs,
          signal,
        ),
      );
      const content = answer.choices[0]?.message.content ?? '';
      try {
        return JSON.parse(content) as unknown;
      } catch {
        throw new Error(`the model's answer is not JSON: ${content.slice(0, 200)}`);
      }
    },
  };
}

const AnthropicAnswer = z.object({
  content: z.array(z.object({ type: z.string(), name: z.string().optional(), input: z.unknown().optional() })),
});

export function anthropicReorganizer(options: LlmOptions): Reorganizer {
  const tool = 'save_scratchpad';
  return {
    name: 'anthropic',
    async reorganize(request, signal) {
      const answer = AnthropicAnswer.parse(
        await postJson(
          `${options.baseUrl.replace(/\/$/, '')}/v1/messages`,
          { ...(options.apiKey ? { 'x-api-key': options.apiKey } : {}), 'anthropic-version': '2023-06-01' },
          {
            model: options.model,
            max_tokens: 8192,
            temperature: 0,
            messages: [{ role: 'user', content: reorganizePrompt(request) }],
            tools: [
              {
                name: tool,
                description: 'Save the reorganized scratchpad.',
                input_schema: REORGANIZED_PAD_JSON_SCHEMA,
              },
            ],
            tool_choice: { type: 'tool', name: tool },
          },
          options.timeoutMs,
          signal,
        ),
      );
      const call = answer.content.find((block) => block.type === 'tool_use' && block.name === tool);
      if (!call) {
        throw new Error(`the model did not call ${tool}`);
      }
      return call.input;
    },
  };
}
