/**
 * Consent through the MCP client: with an approval threshold of 10, a create of 20 items through
 * `opspad mcp` makes the server ask the user (an MCP elicitation, answered by the SDK's own
 * Client) before it answers. While the question is open the operation awaits approval and its
 * task reads `input_required`; yes starts it (to exact counts), no cancels it; the audit trail
 * names the user through the key. A `retry_failed` above the threshold asks the same way.
 */
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CreateTaskResultSchema } from '@modelcontextprotocol/sdk/experimental/tasks/types.js';
import {
  type CallToolResult,
  CallToolResultSchema,
  ElicitRequestSchema,
  type ElicitResult,
} from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defineHandler, ItemError } from '../../src/handlers/types.ts';
import { type Harness, ids, startHarness, type Tenant } from '../helpers/harness.ts';

const BIN = fileURLToPath(new URL('../../bin/opspad.js', import.meta.url));
const TOOL = 'manage_assistant_operation';
const TYPE = 'consent_sms';
const sender = defineHandler({
  type: TYPE,
  batchSize: 5,
  async handle(itemId) {
    if (itemId.startsWith('bad-')) {
      throw new ItemError('no phone');
    }
    return { sent: itemId };
  },
});
const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/;

interface Asked {
  message: string;
  /** The operation's status, and its task's, while the question was open. */
  status: string | undefined;
  taskStatus: string;
}

describe('consent through MCP elicitation', () => {
  let harness: Harness;
  let tenant: Tenant;
  const clients: Client[] = [];
  const statusOf = async (operationId: string) =>
    (
      await harness.db.query<{ status: string }>('SELECT status FROM assistant_operation WHERE id = $1', [operationId])
    )[0]?.status;

  /** A client that declares elicitation and answers `answer`, noting what it saw. */
  const userClient = async (answer: ElicitResult, asked: Asked[]) => {
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [BIN, 'mcp'],
      env: { PATH: process.env.PATH ?? '', OPSPAD_URL: harness.url, OPSPAD_API_KEY: tenant.apiKey },
      stderr: 'pipe',
    });
    const client = new Client({ name: 'opspad-consent-test', version: '0.0.0' }, { capabilities: { elicitation: {} } });
    client.setRequestHandler(ElicitRequestSchema, async (request) => {
      const message = request.params.message;
      const operationId = UUID.exec(message)?.[0] ?? '';
      asked.push({
        message,
        status: await statusOf(operationId),
        taskStatus: (await client.experimental.tasks.getTask(operationId)).status,
      });
      return answer;
    });
    await client.connect(transport, { timeout: 30_000 });
    clients.push(client);
    return client;
  };
  const create = (client: Client, count: number) =>
    client.callTool({
      name: TOOL,
      arguments: { action: 'create', operation_type: TYPE, total_items: count, item_ids: ids(count) },
    }) as Promise<CallToolResult>;
  const json = (result: CallToolResult) =>
    JSON.parse((result.content[0] as { text: string }).text) as Record<string, unknown>;

  beforeAll(async () => {
    harness = await startHarness('postgres', { workers: true, handlers: [sender] });
    tenant = await harness.newTenant();
    await harness.db.query('UPDATE organization SET approve_above = 10 WHERE id = $1', [tenant.organizationId]);
  });

  afterAll(async () => {
    await Promise.all(clients.map((client) => client.close()));
    await harness?.close();
  });

  it('asks before an operation above the threshold starts, and starts it on yes', async () => {
    const asked: Asked[] = [];
    const client = await userClient({ action: 'accept', content: { send: true } }, asked);
    const result = await create(client, 20);
    const body = json(result);
    expect(asked).toEqual([
      {
        message: `Send 20 items for operation ${body.operation_id} (${TYPE})? Your organization asks a person to approve operations of this size.`,
        status: 'awaiting_approval',
        taskStatus: 'input_required',
      },
    ]);
    expect(body).toMatchObject({ status: 'active', approval: 'The user approved it: it runs.' });
    const operationId = String(body.operation_id);
    const final = (await client.experimental.tasks.getTaskResult(operationId, CallToolResultSchema, {
      timeout: 50_000,
    })) as CallToolResult;
    expect(json(final)).toMatchObject({ status: 'completed', completed_count: 20, failed_count: 0 });
    const events = await harness.db.query<{ kind: string; actor: string }>(
      "SELECT kind, actor FROM operation_event WHERE operation_id = $1 AND kind = 'approved'",
      [operationId],
    );
    expect(events).toEqual([{ kind: 'approved', actor: expect.stringMatching(/^user:api_key:/) }]);
  });

  it('cancels it when the user declines, also for a create made as a task', async () => {
    const asked: Asked[] = [];
    const client = await userClient({ action: 'decline' }, asked);
    const declined = json(await create(client, 12));
    expect(declined).toMatchObject({ status: 'cancelled', approval: 'The user declined: it was cancelled.' });
    expect(await statusOf(String(declined.operation_id))).toBe('cancelled');
    const items = await harness.db.query<{ status: string; n: number }>(
      'SELECT status, count(*)::int AS n FROM assistant_operation_item WHERE operation_id = $1 GROUP BY status',
      [declined.operation_id],
    );
    expect(items).toEqual([{ status: 'abandoned', n: 12 }]);

    const { task } = await client.request(
      {
        method: 'tools/call',
        params: {
          name: TOOL,
          arguments: { action: 'create', operation_type: TYPE, total_items: 11, item_ids: ids(11, 't-') },
          task: {},
        },
      },
      CreateTaskResultSchema,
    );
    // The task answers at once, waiting for the user; their answer then moves it on.
    expect(task.status).toBe('input_required');
    const result = (await client.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema, {
      timeout: 50_000,
    })) as CallToolResult;
    expect(json(result)).toMatchObject({ status: 'cancelled', completed_count: 0 });
    expect(asked.map((question) => question.taskStatus)).toEqual(['input_required', 'input_required']);
    expect(await statusOf(task.taskId)).toBe('cancelled');
  });

  it('asks before a retry_failed above the threshold, like a create', async () => {
    const asked: Asked[] = [];
    const client = await userClient({ action: 'accept', content: { send: true } }, asked);
    const first = json(
      (await client.callTool({
        name: TOOL,
        arguments: { action: 'create', operation_type: TYPE, total_items: 12, item_ids: ids(12, 'bad') },
      })) as CallToolResult,
    );
    const firstId = String(first.operation_id);
    const done = (await client.experimental.tasks.getTaskResult(firstId, CallToolResultSchema, {
      timeout: 50_000,
    })) as CallToolResult;
    expect(json(done)).toMatchObject({ status: 'completed', completed_count: 0, failed_count: 12 });

    const retried = json(
      (await client.callTool({
        name: TOOL,
        arguments: { action: 'retry_failed', operation_id: firstId },
      })) as CallToolResult,
    );
    expect(retried).toMatchObject({ status: 'active', total_items: 12, approval: 'The user approved it: it runs.' });
    expect(asked.map((question) => question.message)).toEqual([
      `Send 12 items for operation ${firstId} (${TYPE})? Your organization asks a person to approve operations of this size.`,
      `Send 12 items for operation ${retried.operation_id} (${TYPE})? Your organization asks a person to approve operations of this size.`,
    ]);
    expect(asked[1]?.status).toBe('awaiting_approval');
  });

  it('asks nothing over /mcp, whose per-request servers cannot wait for the reply', async () => {
    const transport = new StreamableHTTPClientTransport(new URL(`${harness.url}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${tenant.apiKey}` } },
    });
    const client = new Client({ name: 'opspad-consent-http', version: '0.0.0' }, { capabilities: { elicitation: {} } });
    const asked: string[] = [];
    client.setRequestHandler(ElicitRequestSchema, async (request) => {
      asked.push(request.params.message);
      return { action: 'accept', content: { send: true } };
    });
    await client.connect(transport, { timeout: 30_000 });
    clients.push(client);
    const body = json(await create(client, 15));
    expect(body.status).toBe('awaiting_approval');
    expect(asked).toEqual([]);
  });

  it('leaves operations at or below the threshold alone', async () => {
    const asked: Asked[] = [];
    const client = await userClient({ action: 'accept', content: { send: true } }, asked);
    expect(json(await create(client, 10)).status).toBe('active');
    expect(asked).toEqual([]);
  });
});
