/**
 * `GET /v1/tools?format=openai|anthropic|opspad` over HTTP, calls made the way a strict OpenAI
 * model makes them (every field of the schema present, null for those it leaves out) carried
 * through a whole operation and a scratchpad update, and `opspad tools print`, which builds the
 * same JSON without a server.
 */
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { JsonSchema } from '../../src/tools/definitions.ts';
import { type OpenAiTool, toolsInFormat } from '../../src/tools/formats.ts';
import { ENGINES, type Harness, startHarness, type Tenant } from '../helpers/harness.ts';

const BIN = fileURLToPath(new URL('../../bin/opspad.js', import.meta.url));
const run = promisify(execFile);

describe.each(ENGINES)('tool definitions per vendor on %s', (engine) => {
  let harness: Harness;
  let tenant: Tenant;

  beforeAll(async () => {
    harness = await startHarness(engine);
    tenant = await harness.newTenant();
  });
  afterAll(async () => {
    await harness.close();
  });

  it('serves each format, the opspad one by default, and refuses an unknown one naming format', async () => {
    const byDefault = await tenant.get<{ tools: unknown[] }>('/v1/tools');
    expect(byDefault.status).toBe(200);
    expect(byDefault.body).toEqual({ tools: toolsInFormat('opspad') });
    expect((await tenant.get('/v1/tools?format=opspad')).body).toEqual(byDefault.body);

    const openai = await tenant.get<{ tools: OpenAiTool[] }>('/v1/tools?format=openai');
    expect(openai.status).toBe(200);
    expect(openai.body).toEqual({ tools: toolsInFormat('openai') });
    expect(openai.body.tools.map((tool) => [tool.type, tool.function.name, tool.function.strict])).toEqual([
      ['function', 'manage_assistant_operation', true],
      ['function', 'write_to_scratchpad', true],
      ['function', 'read_from_scratchpad', true],
      ['function', 'update_scratchpad', true],
    ]);

    const anthropic = await tenant.get<{ tools: Record<string, unknown>[] }>('/v1/tools?format=anthropic');
    expect(anthropic.body).toEqual({ tools: toolsInFormat('anthropic') });
    for (const tool of anthropic.body.tools) {
      expect(Object.keys(tool).sort()).toEqual(['description', 'input_schema', 'name']);
    }

    const unknown = await tenant.get<{ error: { code: string; message: string; details: unknown } }>(
      '/v1/tools?format=gemini',
    );
    expect(unknown.status).toBe(400);
    expect(unknown.body.error.code).toBe('validation_failed');
    expect(unknown.body.error.message).toContain('format: must be one of: opspad, openai, openai-responses, anthropic');
    expect(unknown.body.error.details).toMatchObject({ issues: [{ field: 'format' }] });
  });

  it('carries an operation from create to complete with strict-mode calls (every field, nulls for the unused)', async () => {
    const openai = await tenant.get<{ tools: OpenAiTool[] }>('/v1/tools?format=openai');
    const parameters = openai.body.tools[0]?.function.parameters as JsonSchema;
    const fields = parameters.required as string[];
    const strictCall = (values: Record<string, unknown>) => ({
      ...Object.fromEntries(fields.map((field) => [field, null])),
      ...values,
    });
    const conversation = randomUUID();

    const created = await tenant.op(
      conversation,
      strictCall({ action: 'create', operation_type: 'send_sms', total_items: 3, item_ids: ['c1', 'c2', 'c3'] }),
    );
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    const operationId = created.body.operation_id as string;
    expect(created.body).toMatchObject({ batch_size: 5, execution: 'assistant' }); // null took the defaults

    const progress = await tenant.op(conversation, strictCall({ action: 'progress' }));
    expect(progress.status, JSON.stringify(progress.body)).toBe(200);
    expect(progress.body).toMatchObject({ operation_id: operationId, batch: ['c1', 'c2', 'c3'] });

    const updated = await tenant.op(
      conversation,
      strictCall({
        action: 'update',
        operation_id: operationId,
        completed_ids: ['c1', 'c3'],
        failed: [{ id: 'c2', reason: 'no phone number' }],
      }),
    );
    expect(updated.status, JSON.stringify(updated.body)).toBe(200);
    expect(updated.body).toMatchObject({ completed_count: 2, failed_count: 1, remaining_count: 0 });

    const completed = await tenant.op(conversation, strictCall({ action: 'complete', operation_id: operationId }));
    expect(completed.status, JSON.stringify(completed.body)).toBe(200);
    expect(completed.body).toMatchObject({ status: 'completed' });

    // A field of another action with a value is still refused, naming it.
    const foreign = await tenant.op(conversation, strictCall({ action: 'progress', force: true }));
    expect(foreign.status).toBe(400);
    expect(JSON.stringify(foreign.body)).toContain('force: is not a field of progress (it is for complete)');
  });

  it('writes the scratchpads with strict-mode calls, nested nulls included', async () => {
    const conversation = randomUUID();
    const wrote = await tenant.tool(
      conversation,
      { notes: 'plan: text every Lead', return_history: null },
      'write_to_scratchpad',
    );
    expect(wrote.status, JSON.stringify(wrote.body)).toBe(200);
    const read = await tenant.tool(conversation, { persistent_notes: null }, 'read_from_scratchpad');
    expect(read.body.result).toBe('Notes from scratchpad:\n- plan: text every Lead');

    const updated = await tenant.tool(
      conversation,
      {
        expected_version: null,
        task: 'Text every Lead',
        add: {
          goals: null,
          open_items: [{ text: 'check opt-outs', source_ref: null }],
          facts: [{ text: '30 Leads', source_ref: 'crm:search-1' }],
          refs: [{ id: 'crm:search-1', kind: 'tool_call', label: null, excerpt: null }],
        },
        remove: null,
        replace: null,
        reason: null,
      },
      'update_scratchpad',
    );
    expect(updated.status, JSON.stringify(updated.body)).toBe(200);
    const pad = await tenant.get<{ scratchpad: { facts: unknown[]; open_items: unknown[] } }>(
      `/v1/conversations/${conversation}/scratchpad`,
    );
    expect(pad.body.scratchpad.facts).toEqual([{ text: '30 Leads', source_ref: 'crm:search-1' }]);
    expect(pad.body.scratchpad.open_items).toHaveLength(1);
  });
});

describe('opspad tools print', () => {
  const print = (...args: string[]) =>
    run(process.execPath, [BIN, 'tools', 'print', ...args], { timeout: 30_000 }).then(
      ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
      (error: { code: number; stdout: string; stderr: string }) => error,
    );

  it('prints each format as JSON without a server, the opspad one by default', async () => {
    const [openai, anthropic, byDefault] = await Promise.all([
      print('--format', 'openai'),
      print('--format=anthropic'),
      print(),
    ]);
    expect(openai.code).toBe(0);
    expect(JSON.parse(openai.stdout)).toEqual({ tools: toolsInFormat('openai') });
    expect(JSON.parse(anthropic.stdout)).toEqual({ tools: toolsInFormat('anthropic') });
    expect(JSON.parse(byDefault.stdout)).toEqual({ tools: toolsInFormat('opspad') });
  });

  it('refuses an unknown format (exit 2), naming --format and printing nothing', async () => {
    const refused = await print('--format', 'gemini');
    expect(refused).toMatchObject({ code: 2, stdout: '' });
    expect(refused.stderr).toMatch(
      /^opspad tools print: --format "gemini" is not a format opspad knows\. Use one of: opspad, openai, openai-responses, anthropic\.\n/,
    );
  });
});
