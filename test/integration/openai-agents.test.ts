/**
 * `opspad/openai-agents` in the OpenAI Agents SDK's own `run()` loop, its model the SDK's Chat
 * Completions model talking to a local server that speaks that wire (strict function calling),
 * scripted to decide from the system prompt and its last message alone: with opspad's tools, and
 * the working memory ending the instructions each turn, it finishes a 100-item follow-up with
 * exact counts.
 */
import { randomUUID } from 'node:crypto';
import { Agent, type AgentInputItem, OpenAIProvider, run, setTracingDisabled, tool } from '@openai/agents';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { contactTools } from '../../examples/assistant/contacts.ts';
import { createClient, type OpspadClient } from '../../src/client/index.ts';
import { opspadTools, workingMemory } from '../../src/openai-agents/index.ts';
import { type Harness, startHarness, type Tenant } from '../helpers/harness.ts';
import { followUp, type ScriptedModel, startScriptedOpenAi } from '../helpers/scripted-models.ts';

const INSTRUCTIONS = 'You send follow-up messages to contacts.';

/** A strict tool's JSON Schema, as the Agents SDK types it (the example's schemas are). */
type StrictParameters = {
  type: 'object';
  properties: Record<string, never>;
  required: never[];
  additionalProperties: false;
};

/** What the forgetful model keeps of the run: its last message (the results of its last calls, with those calls). */
function lastMessage(input: AgentInputItem[]): AgentInputItem[] {
  const results: AgentInputItem[] = [];
  for (let i = input.length - 1; i >= 0; i--) {
    const item = input[i] as AgentInputItem;
    if (!('type' in item) || item.type !== 'function_call_result') {
      break;
    }
    results.unshift(item);
  }
  if (results.length === 0) {
    return input.slice(-1);
  }
  const answered = new Set(results.map((item) => ('callId' in item ? item.callId : '')));
  const calls = input.filter((item) => 'type' in item && item.type === 'function_call' && answered.has(item.callId));
  return [...calls, ...results];
}

describe('opspad/openai-agents in the Agents SDK’s run loop (postgres)', () => {
  let harness: Harness;
  let tenant: Tenant;
  let client: OpspadClient;
  let scripted: ScriptedModel;

  beforeAll(async () => {
    setTracingDisabled(true);
    harness = await startHarness('postgres');
    tenant = await harness.newTenant();
    client = createClient({ baseUrl: harness.url, apiKey: tenant.apiKey });
    scripted = await startScriptedOpenAi(followUp);
  });
  afterAll(async () => {
    await scripted?.close();
    await harness?.close();
  });

  it('finishes a 100-item follow-up with a model that keeps only the system prompt and its last message', async () => {
    const conversationId = randomUUID();
    const world = contactTools(100);
    const local = world.tools.map((t) =>
      tool({
        name: t.name,
        description: t.description,
        parameters: t.parameters as StrictParameters,
        strict: true,
        execute: async (input) => JSON.stringify(await t.run(input as Record<string, unknown>)),
      }),
    );
    const model = await new OpenAIProvider({ baseURL: scripted.url, apiKey: 'scripted', useResponses: false }).getModel(
      'scripted',
    );
    const agent = new Agent({
      name: 'Follow-up assistant',
      model,
      instructions: async () => `${INSTRUCTIONS}\n\n${await workingMemory({ client, conversationId })}`,
      tools: [...opspadTools({ client, conversationId }), ...local],
    });
    const result = await run(agent, 'Send a follow-up SMS to every contact tagged Lead', {
      maxTurns: 100,
      // The model forgets: it is sent the instructions and its last message, nothing else.
      callModelInputFilter: ({ modelData }) => ({ ...modelData, input: lastMessage(modelData.input) }),
    });

    const failed = world.contacts.filter(world.hasNoPhone);
    expect(result.finalOutput).toBe(`Done: ${100 - failed.length} sent, ${failed.length} failed.`);
    expect(failed).toHaveLength(8);
    // System prompt, then at most the calls of one turn and their results.
    expect(Math.max(...scripted.requests.map((request) => request.messages))).toBeLessThanOrEqual(5);
    expect(scripted.requests.some((request) => /ACTIVE send_sms/.test(request.system))).toBe(true);
    expect(scripted.requests[0]?.tools.sort()).toEqual([
      'manage_assistant_operation',
      'read_from_scratchpad',
      'read_working_memory',
      'search_contacts',
      'send_sms',
      'update_scratchpad',
      'write_to_scratchpad',
    ]);
    expect(world.sent.sort()).toEqual(world.contacts.filter((id) => !world.hasNoPhone(id)).sort());
    const operations = await harness.db.query<{ status: string; completed_count: number; failed_count: number }>(
      `SELECT status, completed_count, failed_count FROM assistant_operation
       WHERE organization_id = $1 AND conversation_id = $2`,
      [tenant.organizationId, conversationId],
    );
    expect(operations).toEqual([{ status: 'completed', completed_count: 92, failed_count: 8 }]);
  });
});
