/**
 * `opspad mcp` as MCP clients see it: the command runs as a child process speaking MCP over
 * stdio to the SDK's own Client, and talks to a real opspad on loopback over HTTP.
 *
 * - Without --conversation each server process is a session of its own: two sessions create
 *   operations that stay active side by side, two "chats" sharing one server never pause each
 *   other, and a third session that knows nothing finds both, with the next call, through
 *   read_working_memory alone — and that call works from there.
 * - The tools are opspad's, with the schemas GET /v1/tools publishes, plain enough for clients
 *   that read a property's top-level type; calls land in the right conversation; a 4xx comes back
 *   as a tool result with isError and the error JSON; an unknown tool is JSON-RPC -32602.
 * - A bad key or an unreachable opspad still completes initialize; each call then answers
 *   isError saying what to fix. Only honoured capabilities are advertised.
 * - An operator's pause reaches the model as an operator's pause.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { type CallToolResult, ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, ids, startHarness, type Tenant } from '../helpers/harness.ts';

const BIN = fileURLToPath(new URL('../../bin/opspad.js', import.meta.url));
const OPSPAD_TOOLS = ['manage_assistant_operation', 'read_from_scratchpad', 'update_scratchpad', 'write_to_scratchpad'];

interface Session {
  client: Client;
  transport: StdioClientTransport;
  stderr: string[];
  errors: Error[];
  /** A tool call: its result and, when the text is JSON, the parsed body. */
  call(
    name: string,
    args?: Record<string, unknown>,
  ): Promise<{ result: CallToolResult; json: Record<string, unknown> }>;
  /** read_working_memory's text. */
  memory(): Promise<string>;
}

async function startSession(env: Record<string, string>, args: string[] = []): Promise<Session> {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [BIN, 'mcp', ...args],
    env: { PATH: process.env.PATH ?? '', ...env },
    stderr: 'pipe',
  });
  const stderr: string[] = [];
  transport.stderr?.on('data', (chunk: Buffer) => stderr.push(chunk.toString()));
  const client = new Client({ name: 'opspad-mcp-test', version: '0.0.0' });
  const errors: Error[] = [];
  client.onerror = (error) => errors.push(error);
  await client.connect(transport, { timeout: 30_000 });
  const call: Session['call'] = async (name, callArgs = {}) => {
    const result = (await client.callTool({ name, arguments: callArgs })) as CallToolResult;
    const first = result.content[0];
    expect(first?.type).toBe('text');
    const text = (first as { text: string }).text;
    let json: Record<string, unknown> = {};
    try {
      json = JSON.parse(text) as Record<string, unknown>;
    } catch {
      // not JSON (read_working_memory, or a message saying what to fix)
    }
    return { result, json };
  };
  const memory = async () => {
    const { result } = await call('read_working_memory');
    expect(result.isError).toBeFalsy();
    return (result.content[0] as { text: string }).text;
  };
  return { client, transport, stderr, errors, call, memory };
}

async function closeSession(session: Session | undefined): Promise<void> {
  if (!session) {
    return;
  }
  const pid = session.transport.pid;
  const closing = Date.now();
  await session.client.close();
  // The server exits by itself when its stdin closes: before the SDK's SIGTERM, 2 s later.
  expect(Date.now() - closing).toBeLessThan(1900);
  if (pid) {
    expect(() => process.kill(pid, 0)).toThrow();
  }
}

describe('opspad mcp over stdio', () => {
  let harness: Harness;
  let tenant: Tenant;
  const sessions: Session[] = [];
  let env: Record<string, string>;

  const session = async (args: string[] = []) => {
    const started = await startSession(env, args);
    sessions.push(started);
    return started;
  };
  // Three sessions serve the tests in turn (each start costs a process): a and b are two chats
  // of clients that start a server per chat; a is also a server that two chats share.
  let a: Session;
  let b: Session;
  let c: Session;

  const statusOf = async (operationId: string) =>
    (
      await harness.db.query<{ status: string; conversation_id: string }>(
        'SELECT status, conversation_id FROM assistant_operation WHERE id = $1',
        [operationId],
      )
    )[0];

  beforeAll(async () => {
    harness = await startHarness('pglite');
    tenant = await harness.newTenant();
    env = { OPSPAD_URL: harness.url, OPSPAD_API_KEY: tenant.apiKey };
  });

  afterAll(async () => {
    for (const started of sessions) {
      await closeSession(started);
      expect(started.errors).toEqual([]);
    }
    await harness?.close();
  });

  it('offers opspad’s tools with the schemas GET /v1/tools publishes, and read_working_memory', async () => {
    a = await session();
    const mcp = a;
    const { tools } = await mcp.client.listTools();
    expect(tools.map((tool) => tool.name).sort()).toEqual([...OPSPAD_TOOLS, 'read_working_memory'].sort());
    const published = await tenant.get<{ tools: { name: string; description: string; input_schema: unknown }[] }>(
      '/v1/tools',
    );
    for (const definition of published.body.tools) {
      const tool = tools.find((t) => t.name === definition.name);
      expect(tool?.description).toBe(definition.description);
      expect(tool?.inputSchema).toEqual(definition.input_schema);
    }
    // Clients that convert arguments by a property's top-level type (the Inspector CLI) see one.
    const operation = tools.find((tool) => tool.name === 'manage_assistant_operation');
    const properties = operation?.inputSchema.properties as Record<string, { type?: unknown }>;
    expect(properties.batch_size?.type).toBe('integer');
    expect(properties.item_ids?.type).toBe('array');
    expect(properties.force?.type).toBe('boolean');
    expect(JSON.stringify(operation?.inputSchema)).not.toContain('"null"');

    expect(mcp.client.getServerVersion()?.name).toBe('opspad');
    // Only what the server honours: no list-changed or resource-update notifications are sent;
    // the operation tool's creates run as tasks (mcp-tasks.test.ts).
    expect(mcp.client.getServerCapabilities()).toEqual({
      tools: {},
      resources: {},
      tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } },
    });
    expect(mcp.client.getInstructions()).toContain('read_working_memory');
    expect(mcp.stderr.join('')).toContain('serving a session of its own');
  });

  it('reads the key from --key-file, and warns when --key puts it in the process list', async () => {
    const folder = mkdtempSync(join(tmpdir(), 'opspad-mcp-key-'));
    const keyFile = join(folder, 'key');
    writeFileSync(keyFile, `${tenant.apiKey}\n`, { mode: 0o600 });
    try {
      const withoutEnv = { OPSPAD_URL: harness.url };
      const fromFile = await startSession(withoutEnv, ['--key-file', keyFile]);
      sessions.push(fromFile);
      expect(await fromFile.memory()).toBeTruthy();
      expect(fromFile.stderr.join('')).not.toContain('process list');

      const fromArgument = await startSession(withoutEnv, ['--key', tenant.apiKey]);
      sessions.push(fromArgument);
      expect(await fromArgument.memory()).toBeTruthy();
      expect(fromArgument.stderr.join('')).toContain('--key puts the API key in the process list');
    } finally {
      rmSync(folder, { recursive: true, force: true });
    }
  });

  it('gives each session its own conversation: two create operations that stay active side by side', async () => {
    b = await session();
    const createdA = await a.call('manage_assistant_operation', {
      action: 'create',
      operation_type: 'send_sms',
      total_items: 12,
      item_ids: ids(12),
      batch_size: 5,
    });
    const createdB = await b.call('manage_assistant_operation', {
      action: 'create',
      operation_type: 'tag_contacts',
      total_items: 7,
      item_ids: ids(7),
      notes: 'tag every Lead as contacted',
    });
    expect(createdA.result.isError, JSON.stringify(createdA.json)).toBeFalsy();
    expect(createdB.result.isError, JSON.stringify(createdB.json)).toBeFalsy();
    expect(createdA.json.paused_operation_id).toBeNull();
    expect(createdB.json.paused_operation_id).toBeNull();
    const opA = createdA.json.operation_id as string;
    const opB = createdB.json.operation_id as string;
    const [rowA, rowB] = [await statusOf(opA), await statusOf(opB)];
    expect([rowA?.status, rowB?.status]).toEqual(['active', 'active']);
    expect(rowA?.conversation_id).not.toBe(rowB?.conversation_id);

    // Progress without an id continues the session's own operation.
    const progress = await a.call('manage_assistant_operation', { action: 'progress' });
    expect(progress.json).toMatchObject({ operation_id: opA, batch: ids(5) });

    // A third session that knows nothing finds both, with the next action, through the tool alone.
    c = await session();
    const memory = await c.memory();
    // With no operation of its own, the heading names the tool and the call itself.
    expect(memory.split('\n')[0]).toBe(
      'Operations of other conversations (manage_assistant_operation: call the action named with the operation_id):',
    );
    expect(memory).not.toContain('the same calls');
    expect(memory).toMatch(new RegExp(`ACTIVE send_sms, 0/12 done \\(5 in flight\\), id ${opA}: progress`));
    expect(memory).toMatch(new RegExp(`ACTIVE tag_contacts, 0/7 done, id ${opB}: progress, do the batch, update\\.`));
    expect(memory).toContain('Notes: tag every Lead as contacted');

    // …and the call it names works from there, in the operation's own conversation.
    const next = await c.call('manage_assistant_operation', { action: 'progress', operation_id: opB });
    expect(next.result.isError, JSON.stringify(next.json)).toBeFalsy();
    expect(next.json).toMatchObject({ operation_id: opB, batch: ids(5) });
    const update = await c.call('manage_assistant_operation', {
      action: 'update',
      operation_id: opB,
      completed_ids: ids(5),
    });
    expect(update.json).toMatchObject({ completed_count: 5, remaining_count: 2 });
    expect([(await statusOf(opA))?.status, (await statusOf(opB))?.status]).toEqual(['active', 'active']);
  }, 180_000);

  it('never pauses another chat’s operation when chats share one server', async () => {
    // a's first chat has send_sms active at home; two more chats create in the same server.
    const shared = a;
    const first = await shared.call('manage_assistant_operation', {
      action: 'create',
      operation_type: 'chat_one',
      total_items: 3,
      item_ids: ids(3),
    });
    expect(first.json.paused_operation_id).toBeNull();
    const second = await shared.call('manage_assistant_operation', {
      action: 'create',
      operation_type: 'chat_two',
      total_items: 3,
      item_ids: ids(3),
    });
    expect(second.json.paused_operation_id).toBeNull();
    const [one, two] = [first.json.operation_id as string, second.json.operation_id as string];
    expect([(await statusOf(one))?.status, (await statusOf(two))?.status]).toEqual(['active', 'active']);
    // Each is continued by its id, whichever chat asks.
    const progressOne = await shared.call('manage_assistant_operation', { action: 'progress', operation_id: one });
    expect(progressOne.json).toMatchObject({ operation_id: one, status: 'active' });
    const memory = await shared.memory();
    expect(memory).toContain(`id ${one}`);
    expect(memory).toContain(`id ${two}`);
  });

  it('shows an operator’s pause to the model as the operator’s, asking the user first', async () => {
    const mcp = c;
    const created = await mcp.call('manage_assistant_operation', {
      action: 'create',
      operation_type: 'send_invoices',
      total_items: 4,
      item_ids: ids(4),
    });
    const operationId = created.json.operation_id as string;
    const pressed = await fetch(`${harness.url}/admin/operations/${operationId}/pause`, {
      method: 'POST',
      redirect: 'manual',
      headers: {
        authorization: harness.adminAuthorization,
        origin: harness.url,
        referer: `${harness.url}/admin/operations`,
        'content-type': 'application/x-www-form-urlencoded',
      },
      body: 'action=pause',
    });
    expect(pressed.status).toBe(303);

    const memory = await mcp.memory();
    expect(memory).toMatch(
      new RegExp(
        `- #\\d+ PAUSED send_invoices, 0/4 done, id ${operationId}: paused by operator admin: ask the user before resume\\.`,
      ),
    );
    expect(memory).not.toContain('paused by you');
    const get = await mcp.call('manage_assistant_operation', { action: 'get', operation_id: operationId });
    expect(get.json).toMatchObject({
      status: 'paused',
      paused_by: { kind: 'operator', name: 'admin' },
      paused_reason: 'paused by operator admin',
    });
    expect(get.json.next).toContain('Operator admin paused it: ask the user before resuming it');
    const progress = await mcp.call('manage_assistant_operation', { action: 'progress', operation_id: operationId });
    expect(progress.json.next).toContain('ask the user before resuming it');
  });

  it('answers bad input with isError and opspad’s error, naming the field and the action', async () => {
    const mcp = b;
    const bad = await mcp.call('manage_assistant_operation', {
      action: 'create',
      operation_type: 'send_sms',
      total_items: 2,
      item_ids: ['a'],
    });
    expect(bad.result.isError).toBe(true);
    expect(bad.json).toMatchObject({ error: { code: 'validation_failed' } });
    expect((bad.json.error as { message: string }).message).toContain('total_items');

    const missing = await mcp.call('manage_assistant_operation', { action: 'update', completed_ids: ['a'] });
    expect(missing.result.isError).toBe(true);
    expect((missing.json.error as { message: string }).message).toContain(
      "operation_id: missing: update needs the operation's id",
    );

    const unknownAction = await mcp.call('manage_assistant_operation', { action: 'explode' });
    expect(unknownAction.result.isError).toBe(true);
    expect((unknownAction.json.error as { message: string }).message).toContain('action: must be one of');
  });

  it('answers an unknown tool with JSON-RPC -32602', async () => {
    const mcp = b;
    const refused = await mcp.client.callTool({ name: 'drop_tables', arguments: {} }).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(refused).toBeInstanceOf(McpError);
    expect((refused as McpError).code).toBe(ErrorCode.InvalidParams);
    expect((refused as McpError).message).toContain('Unknown tool: drop_tables');
  });

  it('with --conversation, works in that conversation, whose context is also the resource', async () => {
    const conversationId = randomUUID();
    const mcp = await session(['--conversation', conversationId]);
    const created = await mcp.call('manage_assistant_operation', {
      action: 'create',
      operation_type: 'fixed_one',
      total_items: 2,
      item_ids: ids(2),
    });
    const operationId = created.json.operation_id as string;
    expect((await statusOf(operationId))?.conversation_id).toBe(conversationId);
    const wrote = await mcp.call('write_to_scratchpad', { notes: 'c2 has no phone number' });
    expect(wrote.result.isError).toBeFalsy();
    const read = await mcp.call('read_from_scratchpad', {});
    expect(read.json.result).toBe('Notes from scratchpad:\n- c2 has no phone number');

    const viaHttp = await tenant.context(conversationId);
    expect(viaHttp.body.operations.map((op) => op.operation_id)).toEqual([operationId]);
    const { resources } = await mcp.client.listResources();
    expect(resources).toEqual([
      expect.objectContaining({ uri: 'opspad://context', mimeType: 'text/markdown' }),
      expect.objectContaining({ uri: 'ui://opspad/operation.html', mimeType: 'text/html;profile=mcp-app' }),
    ]);
    const resource = await mcp.client.readResource({ uri: 'opspad://context' });
    const text = (resource.contents[0] as { text: string }).text;
    expect(text).toBe(await mcp.memory());
    expect(text.startsWith(viaHttp.body.text)).toBe(true);
    expect(text).toContain(`- #1 ACTIVE fixed_one, 0/2 done, id ${operationId}`);
    expect(mcp.stderr.join('')).toContain(`serving conversation ${conversationId}`);
  });
});

describe('opspad mcp when opspad is unreachable or refuses the key', () => {
  let harness: Harness;
  const sessions: Session[] = [];

  beforeAll(async () => {
    harness = await startHarness('pglite');
  });
  afterAll(async () => {
    for (const started of sessions) {
      await closeSession(started);
    }
    await harness.close();
  });

  it('still completes initialize and lists the tools; each call says what to fix', async () => {
    const badKey = await startSession({ OPSPAD_URL: harness.url, OPSPAD_API_KEY: 'opk_not_a_key' });
    sessions.push(badKey);
    const { tools } = await badKey.client.listTools();
    expect(tools.map((tool) => tool.name)).toContain('manage_assistant_operation');
    const refused = await badKey.call('manage_assistant_operation', { action: 'get' });
    expect(refused.result.isError).toBe(true);
    const message = (refused.result.content[0] as { text: string }).text;
    expect(message).toContain('refused the API key (401');
    expect(message).toContain('Set OPSPAD_API_KEY');
    const memory = await badKey.call('read_working_memory');
    expect(memory.result.isError).toBe(true);

    const noKey = await startSession({ OPSPAD_URL: harness.url });
    sessions.push(noKey);
    const none = await noKey.call('write_to_scratchpad', { notes: 'x' });
    expect(none.result.isError).toBe(true);
    expect((none.result.content[0] as { text: string }).text).toContain('No opspad API key: set OPSPAD_API_KEY');

    // A port nothing listens on (the harness's own, after a probe server closed on it, is racy;
    // port 9 (discard) on loopback is closed on test machines).
    const unreachable = await startSession({ OPSPAD_URL: 'http://127.0.0.1:9', OPSPAD_API_KEY: 'opk_x' });
    sessions.push(unreachable);
    expect((await unreachable.client.listTools()).tools.length).toBe(5);
    const down = await unreachable.call('manage_assistant_operation', { action: 'get' });
    expect(down.result.isError).toBe(true);
    expect((down.result.content[0] as { text: string }).text).toMatch(
      /opspad at http:\/\/127\.0\.0\.1:9 did not answer \(.+\)\. Start it/,
    );
  });

  it('refuses a --conversation that is not a UUID (usage, exit 2), printing nothing on stdout', async () => {
    const { execFile } = await import('node:child_process');
    const result = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
      execFile(
        process.execPath,
        [BIN, 'mcp', '--conversation', 'not-a-uuid'],
        { env: { PATH: process.env.PATH ?? '', OPSPAD_URL: harness.url }, timeout: 30_000 },
        (error, stdout, stderr) =>
          resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
      );
    });
    expect(result).toMatchObject({ code: 2, stdout: '' });
    expect(result.stderr).toContain('must be a UUID');
  });
});
