/**
 * A conversation's tasks, whoever made them, and answers that outlive the process: `GET
 * /v1/conversations/:id/operations` pages a conversation's operations (finished ones included,
 * newest first, organization-scoped), and `tasks/list` of the SDK's own client pages through the
 * same with its cursor. A call that makes no operation, asked as a task, answers a task whose id
 * carries the answer: a second `opspad mcp` process and `/mcp` read the same result after the
 * first process is gone; a tampered id is an unknown task.
 */
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { type CallToolResult, CallToolResultSchema, type Task } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, ids, startHarness, type Tenant } from '../helpers/harness.ts';
import { connectMcp } from '../helpers/mcp-http.ts';

const BIN = fileURLToPath(new URL('../../bin/opspad.js', import.meta.url));
const TOOL = 'manage_assistant_operation';

interface Page {
  operations: { operation_id: string; status: string; created_at: string; total_items: number }[];
  next_before: string | null;
}

function resultJson(result: CallToolResult): Record<string, unknown> {
  const first = result.content[0];
  return JSON.parse(first?.type === 'text' ? first.text : '{}') as Record<string, unknown>;
}

describe('MCP task list and answers', () => {
  let harness: Harness;
  let tenant: Tenant;
  const clients: Client[] = [];
  const conversation = randomUUID();
  /** The conversation's operations, oldest first. */
  const made: string[] = [];

  const open = async (args: string[]) => {
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [BIN, 'mcp', ...args],
      env: { PATH: process.env.PATH ?? '', OPSPAD_URL: harness.url, OPSPAD_API_KEY: tenant.apiKey },
      stderr: 'pipe',
    });
    const client = new Client({ name: 'opspad-task-list-test', version: '0.0.0' });
    await client.connect(transport, { timeout: 30_000 });
    clients.push(client);
    return client;
  };

  beforeAll(async () => {
    harness = await startHarness('postgres');
    tenant = await harness.newTenant();
    // 55 operations made over HTTP, not by any MCP session; a third of them cancelled.
    for (let i = 0; i < 55; i++) {
      const created = await tenant.op(conversation, {
        action: 'create',
        operation_type: 'list_send',
        total_items: 2,
        item_ids: ids(2, `op${i}`),
      });
      expect(created.status).toBe(200);
      const id = created.body.operation_id as string;
      made.push(id);
      if (i % 3 === 1) {
        expect((await tenant.op(conversation, { action: 'cancel', operation_id: id })).status).toBe(200);
      }
    }
  });

  afterAll(async () => {
    await Promise.all(clients.map((client) => client.close()));
    await harness?.close();
  });

  it('pages a conversation’s operations, finished ones included, within the organization', async () => {
    const seen: Page['operations'] = [];
    let before: string | null = null;
    let pages = 0;
    do {
      const query: string = `limit=20${before ? `&before=${before}` : ''}`;
      const page = await tenant.get<Page>(`/v1/conversations/${conversation}/operations?${query}`);
      expect(page.status).toBe(200);
      seen.push(...page.body.operations);
      before = page.body.next_before;
      pages++;
    } while (before);
    expect(pages).toBe(3);
    expect(seen.map((op) => op.operation_id)).toEqual([...made].reverse());
    expect(seen.filter((op) => op.status === 'cancelled')).toHaveLength(18);
    expect(seen.filter((op) => op.status === 'paused')).toHaveLength(36);
    expect(seen[0]).toMatchObject({ status: 'active', total_items: 2 });

    const stranger = await harness.newTenant();
    const foreign = await stranger.get<Page>(`/v1/conversations/${conversation}/operations`);
    expect(foreign.body).toEqual({ operations: [], next_before: null });

    const badLimit = await tenant.get(`/v1/conversations/${conversation}/operations?limit=500`);
    expect(badLimit.status).toBe(400);
    expect(JSON.stringify(badLimit.body)).toContain('limit');
    const badBefore = await tenant.get(`/v1/conversations/${conversation}/operations?before=yesterday`);
    expect(badBefore.status).toBe(400);
    expect(JSON.stringify(badBefore.body)).toContain('before');
  });

  it('lists them all through tasks/list, a page per cursor', async () => {
    const client = await open(['--conversation', conversation]);
    const first = await client.experimental.tasks.listTasks();
    expect(first.tasks).toHaveLength(50);
    expect(first.nextCursor).toBeDefined();
    const second = await client.experimental.tasks.listTasks(first.nextCursor);
    expect(second.nextCursor).toBeUndefined();
    const tasks: Task[] = [...first.tasks, ...second.tasks];
    expect(tasks.map((task) => task.taskId)).toEqual([...made].reverse());
    expect(tasks.filter((task) => task.status === 'cancelled')).toHaveLength(18);
    expect(tasks[0]?.statusMessage).toBe('Active; 0/2 done: 0 completed, 0 failed, 2 remaining.');
    const bad = await client.experimental.tasks.listTasks('not-a-cursor').catch((error: Error) => error.message);
    expect(bad).toMatch(/before/);
  });

  it('answers a call that makes no operation with a task any process reads back', async () => {
    const own = randomUUID();
    const created = await tenant.op(own, {
      action: 'create',
      operation_type: 'list_send',
      total_items: 3,
      item_ids: ['a', 'b', 'c'],
      batch_size: 2,
    });
    const operationId = created.body.operation_id as string;
    const first = await open(['--conversation', own]);
    // Having listed the tools, the client knows the operation tool supports tasks.
    await first.listTools();
    let task: Task | undefined;
    let result: CallToolResult | undefined;
    // The SDK's own loop, as a client that calls every call of a task tool as a task.
    for await (const message of first.experimental.tasks.callToolStream(
      { name: TOOL, arguments: { action: 'progress', operation_id: operationId } },
      CallToolResultSchema,
    )) {
      if (message.type === 'taskCreated') {
        task = message.task;
      } else if (message.type === 'result') {
        result = message.result as CallToolResult;
      } else if (message.type === 'error') {
        throw message.error;
      }
    }
    expect(task?.status).toBe('completed');
    expect(resultJson(result as CallToolResult).batch).toEqual(['a', 'b']);
    await first.close();

    const taskId = task?.taskId as string;
    const second = await open(['--conversation', own]);
    expect((await second.experimental.tasks.getTask(taskId)).status).toBe('completed');
    const again = (await second.experimental.tasks.getTaskResult(taskId, CallToolResultSchema)) as CallToolResult;
    expect(again).toEqual(result);

    const session = await connectMcp(`${harness.url}/mcp`, tenant.apiKey);
    try {
      const overHttp = await session.client.experimental.tasks.getTaskResult(taskId, CallToolResultSchema);
      expect(overHttp).toEqual(result);
    } finally {
      await session.close();
    }

    const tampered = `${taskId.slice(0, -4)}AAAA`;
    const unknown = await second.experimental.tasks.getTask(tampered).catch((error: Error) => error.message);
    expect(unknown).toMatch(/Task not found/);
  });
});
