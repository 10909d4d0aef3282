/**
 * `opspad/openai-agents`: opspad in the OpenAI Agents SDK (`@openai/agents`, an optional peer
 * dependency). `opspadTools` gives the operation tool, the scratchpad tools and
 * `read_working_memory` as function tools bound to one conversation; `workingMemory` the text to
 * end an agent's instructions with, which the SDK asks for again at every turn when
 * `instructions` is a function — so a run whose history is trimmed still finds its place.
 *
 * The tools are strict (the OpenAI format of `GET /v1/tools`: every field present, null for one
 * left out, which opspad reads as not given), as the Agents SDK prefers and OpenAI's models honour.
 *
 * @example
 * import { Agent, run } from '@openai/agents';
 * import { createClient } from 'opspad/client';
 * import { opspadTools, workingMemory } from 'opspad/openai-agents';
 *
 * const client = createClient({ baseUrl: 'http://127.0.0.1:3000', apiKey: process.env.OPSPAD_API_KEY! });
 * const conversationId = crypto.randomUUID();
 * const agent = new Agent({
 *   name: 'Assistant',
 *   instructions: async () => `${instructions}\n\n${await workingMemory({ client, conversationId })}`,
 *   tools: [...opspadTools({ client, conversationId }), ...yourTools],
 * });
 * const result = await run(agent, 'Send a follow-up SMS to every contact tagged Lead', { maxTurns: 200 });
 */
import { type FunctionTool, tool } from '@openai/agents';
import { type OpspadToolsOptions, opspadToolSpecs, workingMemory } from '../frameworks/opspad-tools.ts';
import { OPENAI_NULL_HINT, toOpenAiStrictSchema } from '../tools/formats.ts';

export { type OpspadToolsOptions, workingMemory };

/** The shape the Agents SDK wants of a strict tool's JSON Schema (toOpenAiStrictSchema makes it). */
type StrictParameters = {
  type: 'object';
  properties: Record<string, never>;
  required: never[];
  additionalProperties: false;
};

/** One of opspad's tools as the Agents SDK types it. */
export type OpspadFunctionTool = FunctionTool<unknown, StrictParameters, string>;

/** opspad's tools, for an `Agent`'s `tools`. */
export function opspadTools(options: OpspadToolsOptions): OpspadFunctionTool[] {
  return opspadToolSpecs(options).map((spec) =>
    tool<StrictParameters, unknown, string>({
      name: spec.name,
      description: `${spec.description} ${OPENAI_NULL_HINT}`,
      parameters: toOpenAiStrictSchema(spec.parameters) as StrictParameters,
      strict: true,
      execute: async (input, _context, details) => {
        const answer = await spec.call(input, details?.signal);
        return typeof answer === 'string' ? answer : JSON.stringify(answer);
      },
    }),
  );
}
