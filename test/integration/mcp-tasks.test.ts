/**
 * MCP Tasks as the SDK's own Client sees them: a `create` of a background operation called as a
 * task answers a task whose id is the operation id, over `opspad mcp` (a child process on stdio)
 * and over `/mcp`. The task is read from the operation in Postgres: tasks/get until completed
 * with exact counts, tasks/result with the failures grouped by reason and the retry call,
 * tasks/cancel cancels the operation, a task outlives the MCP process that made it and a second
 * process sees it; another organization's task answers like an unknown one; a client that does
 * not ask for a task gets today's plain result.
 */
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { CreateTaskResultSchema } from '@modelcontextprotocol/sdk/experimental/tasks/types.js';
import { type CallToolResult, CallToolResultSchema, type Task } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defineHandler, ItemError } from '../../src/handlers/types.ts';
import { type Harness, ids, startHarness, type Tenant } from '../helpers/harness.ts';
import { connectMcp } from '../helpers/mcp-http.ts';

const BIN = fileURLToPath(new URL('../../bin/opspad.js', import.meta.url));
const TOOL = 'manage_assistant_operation';
const TYPE = 'task_send';

/** Items named `hold-…` wait for the gate (or their operation's end); `bad-…` fail for want of a phone. */
let openGate: () => void = () => {};
let gate = new Promise<void>((resolve) => {
  openGate = resolve;
});
const sender = defineHandler({
  type: TYPE,
  batchSize: 5,
  async handle(itemId, ctx) {
    if (itemId.startsWith('hold-')) {
      await new Promise<void>((resolve, reject) => {
        void gate.then(resolve);
        ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason), { once: true });
      });
    }
    if (itemId.startsWith('bad-')) {
      throw new ItemError('no phone');
    }
    return { sent: itemId };
  },
});

async function stdioClient(env: Record<string, string>, args: string[] = []): Promise<Client> {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [BIN, 'mcp', ...args],
    env: { PATH: process.env.PATH ?? '', ...env },
    stderr: 'pipe',
  });
  const client = new Client({ name: 'opspad-mcp-tasks-test', version: '0.0.0' });
  await client.connect(transport, { timeout: 30_000 });
  return client;
}

/** A create called as a task: the task, as soon as the server answers. */
async function createAsTask(client: Client, itemIds: string[]): Promise<Task> {
  const answer = await client.request(
    {
      method: 'tools/call',
      params: {
        name: TOOL,
        arguments: {
          action: 'create',
          operation_type: TYPE,
          total_items: itemIds.length,
          item_ids: itemIds,
          execution: 'background',
        },
        task: {},
      },
    },
    CreateTaskResultSchema,
  );
  return answer.task;
}

function resultJson(result: CallToolResult): Record<string, unknown> {
  const first = result.content[0];
  return JSON.parse(first?.type === 'text' ? first.text : '{}') as Record<string, unknown>;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

describe('MCP Tasks', () => {
  let harness: Harness;
  let tenant: Tenant;
  let env: Record<string, string>;
  const clients: Client[] = [];
  const open = async (args: string[] = [], key?: string) => {
    const client = await stdioClient({ ...env, ...(key ? { OPSPAD_API_KEY: key } : {}) }, args);
    clients.push(client);
    return client;
  };
  const statusOf = async (operationId: string) =>
    (
      await harness.db.query<{ status: string }>('SELECT status FROM assistant_operation WHERE id = $1', [operationId])
    )[0]?.status;

  beforeAll(async () => {
    harness = await startHarness('postgres', { workers: true, handlers: [sender] });
    tenant = await harness.newTenant();
    env = { OPSPAD_URL: harness.url, OPSPAD_API_KEY: tenant.apiKey };
  });

  afterAll(async () => {
    openGate();
    await Promise.all(clients.map((client) => client.close()));
    await harness?.close();
  });

  it('advertises tasks, and runs a create as a task until completed with exact counts', async () => {
    const client = await open();
    expect(client.getServerCapabilities()?.tasks).toEqual({
      list: {},
      cancel: {},
      requests: { tools: { call: {} } },
    });
    const { tools } = await client.listTools();
    expect(tools.find((tool) => tool.name === TOOL)?.execution).toEqual({ taskSupport: 'optional' });

    const itemIds = [...ids(7), 'bad-1', 'bad-2', 'bad-3'];
    const messages: string[] = [];
    let result: CallToolResult | undefined;
    let taskId = '';
    // The SDK's own loop: create as a task, tasks/get at the poll interval, then tasks/result.
    for await (const message of client.experimental.tasks.callToolStream(
      {
        name: TOOL,
        arguments: {
          action: 'create',
          operation_type: TYPE,
          total_items: itemIds.length,
          item_ids: itemIds,
          execution: 'background',
        },
      },
      CallToolResultSchema,
      { task: {} },
    )) {
      messages.push(message.type);
      if (message.type === 'taskCreated') {
        taskId = message.task.taskId;
      }
      if (message.type === 'result') {
        result = message.result as CallToolResult;
      }
      if (message.type === 'error') {
        throw message.error;
      }
    }
    expect(messages[0]).toBe('taskCreated');
    expect(taskId).toMatch(UUID);
    expect(await statusOf(taskId)).toBe('completed');
    expect(result?.isError).toBeFalsy();
    expect(resultJson(result as CallToolResult)).toEqual({
      operation_id: taskId,
      status: 'completed',
      total_items: 10,
      completed_count: 7,
      failed_count: 3,
      remaining_count: 0,
      failure_reasons: [{ reason: 'no phone', count: 3, examples: ['bad-1', 'bad-2', 'bad-3'] }],
      next: `To retry the 3 failed items: ${TOOL} {"action":"retry_failed","operation_id":"${taskId}"}`,
    });
    const task = await client.experimental.tasks.getTask(taskId);
    expect(task).toMatchObject({ taskId, status: 'completed', ttl: null, pollInterval: 1000 });
    expect(task.statusMessage).toBe('Completed; 10/10 done: 7 completed, 3 failed, 0 remaining.');
    expect((await client.experimental.tasks.listTasks()).tasks.map((listed) => listed.taskId)).toContain(taskId);
  });

  it('cancels the operation on tasks/cancel', async () => {
    const client = await open();
    const task = await createAsTask(client, ids(6, 'hold-'));
    expect(task.status).toBe('working');
    expect(task.statusMessage).toMatch(/^Active; 0\/6 done/);
    const cancelled = await client.experimental.tasks.cancelTask(task.taskId);
    expect(cancelled.status).toBe('cancelled');
    expect(await statusOf(task.taskId)).toBe('cancelled');
    expect((await client.experimental.tasks.getTask(task.taskId)).status).toBe('cancelled');
  });

  it('keeps a task across a restart of opspad mcp, and a second process sees it', async () => {
    const conversation = randomUUID();
    const first = await open(['--conversation', conversation]);
    const task = await createAsTask(first, ['hold-a', 'hold-b', 'bad-c']);
    await first.close();

    const again = await open(['--conversation', conversation]);
    const other = await open();
    expect((await again.experimental.tasks.getTask(task.taskId)).status).toBe('working');
    expect((await again.experimental.tasks.listTasks()).tasks.map((listed) => listed.taskId)).toEqual([task.taskId]);
    expect((await other.experimental.tasks.getTask(task.taskId)).status).toBe('working');
    openGate();
    // tasks/result waits for the end of the operation.
    const result = (await other.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema, {
      timeout: 50_000,
    })) as CallToolResult;
    expect(resultJson(result)).toMatchObject({ completed_count: 2, failed_count: 1, remaining_count: 0 });
    expect((await again.experimental.tasks.getTask(task.taskId)).status).toBe('completed');
    gate = new Promise<void>((resolve) => {
      openGate = resolve;
    });
  });

  it("answers another organization's task like an unknown one", async () => {
    const owner = await open();
    const task = await createAsTask(owner, ['x-1']);
    const stranger = await open([], (await harness.newTenant()).apiKey);
    const foreign = await stranger.experimental.tasks.getTask(task.taskId).catch((error: Error) => error.message);
    const unknown = await stranger.experimental.tasks.getTask(randomUUID()).catch((error: Error) => error.message);
    expect(foreign).toBe(unknown);
    expect(foreign).toMatch(/Task not found/);
    expect((await stranger.experimental.tasks.listTasks()).tasks).toEqual([]);
  });

  it('gives a client that asks for no task the plain result', async () => {
    const client = await open();
    const result = (await client.callTool({
      name: TOOL,
      arguments: { action: 'create', operation_type: TYPE, total_items: 2, item_ids: ['p-1', 'p-2'] },
    })) as CallToolResult;
    expect(result.isError).toBeFalsy();
    expect(resultJson(result)).toMatchObject({ status: 'active', total_items: 2 });
    expect(result).not.toHaveProperty('task');
  });

  it('serves the same tasks over /mcp', async () => {
    const session = await connectMcp(`${harness.url}/mcp`, tenant.apiKey);
    try {
      const task = await createAsTask(session.client, [...ids(4, 'h'), 'bad-h']);
      expect(task.taskId).toMatch(UUID);
      const result = (await session.client.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema, {
        timeout: 50_000,
      })) as CallToolResult;
      expect(resultJson(result)).toMatchObject({ status: 'completed', completed_count: 4, failed_count: 1 });
      // The stdio server, talking HTTP, sees the task /mcp made.
      const stdio = await open();
      expect((await stdio.experimental.tasks.getTask(task.taskId)).status).toBe('completed');
    } finally {
      await session.close();
    }
  });
});
