/**
 * examples/assistant against scripted models on loopback that forget everything but the system
 * prompt and their last message (test/helpers/scripted-models.ts). Each finishes a 100-contact
 * follow-up with exact counts, using only what opspad gives it:
 * - an OpenAI strict-mode loop (Chat Completions, every field sent, null or the advertised
 *   default where not meant), the context fragment in its system prompt;
 * - an Anthropic Messages loop, the fragment in its system prompt;
 * - an Anthropic loop through `opspad mcp`, as a desktop client: nothing of opspad in the system
 *   prompt, the fragment read with read_working_memory.
 */
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type OpspadConnection, runAssistant } from '../../examples/assistant/assistant.ts';
import { contactTools } from '../../examples/assistant/contacts.ts';
import { httpOpspad, mcpOpspad } from '../../examples/assistant/opspad.ts';
import { anthropicProvider, type ModelProvider, openAiProvider } from '../../examples/assistant/providers.ts';
import { type Harness, startHarness, type Tenant } from '../helpers/harness.ts';
import {
  followUp,
  type ScriptedModel,
  startScriptedAnthropic,
  startScriptedOpenAi,
} from '../helpers/scripted-models.ts';

const BIN = fileURLToPath(new URL('../../bin/opspad.js', import.meta.url));

describe('the example assistant finishes a 100-contact follow-up after forgetting everything (postgres)', () => {
  let harness: Harness;
  let tenant: Tenant;
  const models: ScriptedModel[] = [];

  beforeAll(async () => {
    harness = await startHarness('postgres');
    tenant = await harness.newTenant();
  });
  afterAll(async () => {
    for (const model of models) {
      await model.close();
    }
    await harness.close();
  });

  async function follow(opspad: OpspadConnection, provider: ModelProvider) {
    const app = contactTools(100);
    const result = await runAssistant({
      opspad,
      provider,
      localTools: app.tools,
      userMessage: 'Send a follow-up SMS to every contact tagged Lead',
      historyLimit: 1,
    });
    const failing = app.contacts.filter(app.hasNoPhone).length;
    expect(result.answer).toBe(`Done: ${100 - failing} sent, ${failing} failed.`);
    expect(app.sent).toHaveLength(100 - failing);
    expect(new Set(app.sent).size).toBe(100 - failing); // nobody got the SMS twice
    const rows = await harness.db.query<{ status: string; completed_count: number; failed_count: number }>(
      `SELECT status, completed_count, failed_count FROM assistant_operation
       WHERE organization_id = $1 AND operation_type = 'send_sms' ORDER BY created_at DESC LIMIT 1`,
      [tenant.organizationId],
    );
    expect(rows).toEqual([{ status: 'completed', completed_count: 100 - failing, failed_count: failing }]);
    return result;
  }

  it('with OpenAI strict function calling (every field sent, defaults and nulls included)', async () => {
    const model = await startScriptedOpenAi(followUp);
    models.push(model);
    await follow(
      httpOpspad({ url: harness.url, apiKey: tenant.apiKey, conversationId: randomUUID() }),
      openAiProvider({ baseUrl: model.url, model: 'scripted' }),
    );
    // It only ever saw the system prompt, its own last message and the answer to it.
    expect(Math.max(...model.requests.map((request) => request.messages))).toBeLessThanOrEqual(3);
    expect(model.requests.some((request) => request.system.includes('ACTIVE send_sms'))).toBe(true);
    // Strict mode: other actions' fields went along, null or at their advertised defaults.
    const update = model.calls.find((call) => call.args.action === 'update');
    expect(update?.args).toMatchObject({ batch_size: 5, lease_seconds: 300, force: false, query_params: null });
  }, 240_000);

  it('with the Anthropic Messages API', async () => {
    const model = await startScriptedAnthropic(followUp);
    models.push(model);
    await follow(
      httpOpspad({ url: harness.url, apiKey: tenant.apiKey, conversationId: randomUUID() }),
      anthropicProvider({ baseUrl: model.url, model: 'scripted' }),
    );
    expect(Math.max(...model.requests.map((request) => request.messages))).toBeLessThanOrEqual(2);
  }, 240_000);

  it('through opspad mcp, reading its working memory with the tool alone, as a desktop client', async () => {
    const model = await startScriptedAnthropic(followUp);
    models.push(model);
    const client = new Client({ name: 'desktop-like', version: '0.0.0' });
    await client.connect(
      new StdioClientTransport({
        command: process.execPath,
        args: [BIN, 'mcp'],
        env: { PATH: process.env.PATH ?? '', OPSPAD_URL: harness.url, OPSPAD_API_KEY: tenant.apiKey },
        stderr: 'ignore',
      }),
      { timeout: 30_000 },
    );
    try {
      await follow(mcpOpspad(client), anthropicProvider({ baseUrl: model.url, model: 'scripted' }));
    } finally {
      await client.close();
    }
    // The fragment never came through the system prompt: the model asked for it.
    expect(model.requests.every((request) => !request.system.includes('send_sms'))).toBe(true);
    expect(model.requests[0]?.tools).toContain('read_working_memory');
    expect(Math.max(...model.requests.map((request) => request.messages))).toBeLessThanOrEqual(2);
  }, 240_000);
});
