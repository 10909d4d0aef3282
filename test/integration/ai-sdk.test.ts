/**
 * `opspad/ai-sdk` in the AI SDK's own agent loop (`generateText` with tools, `stopWhen` and
 * `prepareStep`), the model being the library's MockLanguageModelV3 driven by a scripted policy
 * that keeps only the system prompt and its last message: with opspad's tools and the working
 * memory in the system prompt each step, it finishes a 100-item follow-up with exact counts.
 */
import { randomUUID } from 'node:crypto';
import { generateText, jsonSchema, stepCountIs, type Tool, tool } from 'ai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { contactTools } from '../../examples/assistant/contacts.ts';
import { opspadTools, workingMemory } from '../../src/ai-sdk/index.ts';
import { createClient, type OpspadClient } from '../../src/client/index.ts';
import { EMPTY_WORKING_MEMORY } from '../../src/tools/working-memory-tool.ts';
import { type Harness, startHarness, type Tenant } from '../helpers/harness.ts';
import { scriptedAiSdkModel } from '../helpers/scripted-ai-sdk.ts';
import { followUp } from '../helpers/scripted-models.ts';

const INSTRUCTIONS = 'You send follow-up messages to contacts.';

describe('opspad/ai-sdk in the AI SDK’s agent loop (postgres)', () => {
  let harness: Harness;
  let tenant: Tenant;
  let client: OpspadClient;

  beforeAll(async () => {
    harness = await startHarness('postgres');
    tenant = await harness.newTenant();
    client = createClient({ baseUrl: harness.url, apiKey: tenant.apiKey });
  });
  afterAll(async () => {
    await harness?.close();
  });

  it('gives the operation tool, the scratchpad tools and read_working_memory', async () => {
    const conversationId = randomUUID();
    const tools = opspadTools({ client, conversationId });
    expect(Object.keys(tools).sort()).toEqual([
      'manage_assistant_operation',
      'read_from_scratchpad',
      'read_working_memory',
      'update_scratchpad',
      'write_to_scratchpad',
    ]);
    expect(await workingMemory({ client, conversationId })).toBe(EMPTY_WORKING_MEMORY);
  });

  it('finishes a 100-item follow-up with a model that keeps only the system prompt and its last message', async () => {
    const conversationId = randomUUID();
    const world = contactTools(100);
    const local: Record<string, Tool<unknown, unknown>> = Object.fromEntries(
      world.tools.map((t) => [
        t.name,
        tool({
          description: t.description,
          inputSchema: jsonSchema<unknown>(t.parameters),
          execute: (input) => t.run(input as Record<string, unknown>),
        }),
      ]),
    );
    const scripted = scriptedAiSdkModel(followUp);
    const systems: string[] = [];
    const result = await generateText({
      model: scripted.model,
      tools: { ...opspadTools({ client, conversationId }), ...local },
      stopWhen: stepCountIs(100),
      prepareStep: async ({ messages }) => {
        const system = `${INSTRUCTIONS}\n\n${await workingMemory({ client, conversationId })}`;
        systems.push(system);
        // The model forgets: it is sent the working memory and the last message, nothing else.
        return { system, messages: messages.slice(-1) };
      },
      prompt: 'Send a follow-up SMS to every contact tagged Lead',
    });

    const failed = world.contacts.filter(world.hasNoPhone);
    expect(result.text).toBe(`Done: ${100 - failed.length} sent, ${failed.length} failed.`);
    expect(failed).toHaveLength(8);
    expect(scripted.promptSizes.every((size) => size === 1)).toBe(true);
    // Ten batches of 10, each sent once: nothing repeated, nothing skipped.
    expect(world.sent.sort()).toEqual(world.contacts.filter((id) => !world.hasNoPhone(id)).sort());
    expect(systems.some((system) => /ACTIVE send_sms/.test(system))).toBe(true);
    const operations = await harness.db.query<{ status: string; completed_count: number; failed_count: number }>(
      `SELECT status, completed_count, failed_count FROM assistant_operation
       WHERE organization_id = $1 AND conversation_id = $2`,
      [tenant.organizationId, conversationId],
    );
    expect(operations).toEqual([{ status: 'completed', completed_count: 92, failed_count: 8 }]);
  });

  it('hands a refusal back to the model as opspad’s error, for it to fix its call', async () => {
    const tools = opspadTools({ client, conversationId: randomUUID() });
    const answer = await tools.manage_assistant_operation?.execute?.(
      { action: 'update', completed_ids: ['x'] },
      { toolCallId: 'call_1', messages: [] },
    );
    expect(answer).toMatchObject({ error: { code: 'validation_failed' } });
    expect(JSON.stringify(answer)).toContain('operation_id');
  });
});
