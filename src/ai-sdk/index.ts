/**
 * `opspad/ai-sdk`: opspad in the AI SDK (`ai`, an optional peer dependency). `opspadTools` gives
 * the operation tool, the scratchpad tools and `read_working_memory` as AI SDK tools bound to one
 * conversation; `workingMemory` the text to put in the system prompt at every step (from
 * `prepareStep`), so a model whose earlier messages are trimmed still finds its open operations
 * and the next call.
 *
 * @example
 * import { generateText, stepCountIs } from 'ai';
 * import { createClient } from 'opspad/client';
 * import { opspadTools, workingMemory } from 'opspad/ai-sdk';
 *
 * const client = createClient({ baseUrl: 'http://127.0.0.1:3000', apiKey: process.env.OPSPAD_API_KEY! });
 * const conversationId = crypto.randomUUID();
 * const result = await generateText({
 *   model,
 *   tools: { ...opspadTools({ client, conversationId }), ...yourTools },
 *   stopWhen: stepCountIs(200),
 *   prepareStep: async () => ({ system: `${instructions}\n\n${await workingMemory({ client, conversationId })}` }),
 *   prompt: 'Send a follow-up SMS to every contact tagged Lead',
 * });
 */
import { jsonSchema, type Tool, tool } from 'ai';
import { type OpspadToolsOptions, opspadToolSpecs, workingMemory } from '../frameworks/opspad-tools.ts';

export { type OpspadToolsOptions, workingMemory };

/** opspad's tools by name, ready for `generateText`, `streamText` or an `Agent`'s `tools`. */
export function opspadTools(options: OpspadToolsOptions): Record<string, Tool<unknown, unknown>> {
  return Object.fromEntries(
    opspadToolSpecs(options).map((spec) => [
      spec.name,
      tool({
        description: spec.description,
        inputSchema: jsonSchema<unknown>(spec.parameters),
        execute: (input, { abortSignal }) => spec.call(input, abortSignal),
      }),
    ]),
  );
}
