/**
 * `opspad mcp` as an MCP client sees it: the command runs as a child process speaking MCP over
 * stdio to the SDK's own Client, and talks to a real opspad on loopback over HTTP. The tools are
 * opspad's, with the schemas GET /v1/tools publishes; calls land in the conversation; an opspad
 * 4xx comes back as a tool result with isError and the error JSON; the context resource is the
 * fragment's text. Nothing but the protocol reaches stdout (the client would fail to parse it).
 */
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, startHarness, type Tenant } from '../helpers/harness.ts';

const BIN = fileURLToPath(new URL('../../bin/opspad.js', import.meta.url));
const TOOL_NAMES = ['manage_assistant_operation', 'read_from_scratchpad', 'update_scratchpad', 'write_to_scratchpad'];
const run = promisify(execFile);

interface Answer {
  result: CallToolResult;
  json: Record<string, unknown>;
}

describe('opspad mcp over stdio', () => {
  let harness: Harness;
  let tenant: Tenant;
  let client: Client;
  let transport: StdioClientTransport;
  const conversationId = randomUUID();
  const stderr: string[] = [];
  const clientErrors: Error[] = [];

  async function call(name: string, args: Record<string, unknown>): Promise<Answer> {
    const result = (await client.callTool({ name, arguments: args })) as CallToolResult;
    const first = result.content[0];
    expect(first?.type).toBe('text');
    return { result, json: JSON.parse((first as { text: string }).text) as Record<string, unknown> };
  }

  beforeAll(async () => {
    harness = await startHarness('pglite');
    tenant = await harness.newTenant();
    transport = new StdioClientTransport({
      command: process.execPath,
      args: [BIN, 'mcp', '--conversation', conversationId],
      env: { OPSPAD_URL: harness.url, OPSPAD_API_KEY: tenant.apiKey },
      stderr: 'pipe',
    });
    transport.stderr?.on('data', (chunk: Buffer) => stderr.push(chunk.toString()));
    client = new Client({ name: 'opspad-mcp-test', version: '0.0.0' });
    client.onerror = (error) => clientErrors.push(error);
    await client.connect(transport, { timeout: 30_000 });
  });

  afterAll(async () => {
    const pid = transport?.pid;
    const closing = Date.now();
    await client?.close();
    // The server exits by itself when its stdin closes: before the SDK's SIGTERM, 2 s later.
    expect(Date.now() - closing).toBeLessThan(1900);
    if (pid) {
      expect(() => process.kill(pid, 0)).toThrow();
    }
    await harness?.close();
  });

  it('offers the four opspad tools with the input schemas GET /v1/tools publishes', async () => {
    const { tools } = await client.listTools();
    expect(tools.map((tool) => tool.name).sort()).toEqual(TOOL_NAMES);
    const published = await tenant.get<{ tools: { name: string; description: string; input_schema: unknown }[] }>(
      '/v1/tools',
    );
    for (const tool of tools) {
      const definition = published.body.tools.find((d) => d.name === tool.name);
      expect(tool.description).toBe(definition?.description);
      expect(tool.inputSchema).toEqual(definition?.input_schema);
      expect(tool.inputSchema.type).toBe('object');
    }
    const operation = tools.find((tool) => tool.name === 'manage_assistant_operation');
    expect(operation?.inputSchema.properties?.action).toMatchObject({ enum: expect.arrayContaining(['create']) });
    expect(client.getServerVersion()?.name).toBe('opspad');
  });

  it('forwards calls into the conversation, and the context resource shows the operation', async () => {
    const created = await call('manage_assistant_operation', {
      action: 'create',
      operation_type: 'send_sms',
      total_items: 3,
      item_ids: ['c1', 'c2', 'c3'],
      batch_size: 2,
    });
    expect(created.result.isError, JSON.stringify(created.json)).toBeFalsy();
    const operationId = created.json.operation_id as string;
    expect(operationId).toMatch(/^[0-9a-f-]{36}$/);
    expect(created.result.structuredContent).toEqual(created.json);

    const progress = await call('manage_assistant_operation', { action: 'progress' });
    expect(progress.result.isError).toBeFalsy();
    expect(progress.json).toMatchObject({ operation_id: operationId, batch: ['c1', 'c2'], remaining_count: 3 });

    // The call reached this tenant's conversation, as the HTTP API sees it.
    const viaHttp = await tenant.context(conversationId);
    expect(viaHttp.body.operations.map((op) => op.operation_id)).toEqual([operationId]);

    const { resources } = await client.listResources();
    const uri = `opspad://conversations/${conversationId}/context`;
    expect(resources).toContainEqual(expect.objectContaining({ uri, name: 'context', mimeType: 'text/markdown' }));
    const read = await client.readResource({ uri });
    expect(read.contents).toHaveLength(1);
    expect(read.contents[0]).toMatchObject({ uri, mimeType: 'text/markdown' });
    const text = (read.contents[0] as { text: string }).text;
    expect(text).toContain(operationId);
    expect(text).toContain('send_sms');
    expect(text).toBe(viaHttp.body.text);
  });

  it('forwards the scratchpad tools too', async () => {
    const wrote = await call('write_to_scratchpad', { notes: 'c2 has no phone number' });
    expect(wrote.result.isError).toBeFalsy();
    const read = await call('read_from_scratchpad', {});
    expect(read.json.result).toBe('Notes from scratchpad:\n- c2 has no phone number');
  });

  it('answers bad input with isError and opspad’s validation error, which names the field', async () => {
    const bad = await call('manage_assistant_operation', {
      action: 'create',
      operation_type: 'send_sms',
      total_items: 2,
      item_ids: ['a'],
    });
    expect(bad.result.isError).toBe(true);
    expect(bad.json).toMatchObject({ error: { code: 'validation_failed' } });
    expect((bad.json.error as { message: string }).message).toContain('total_items');

    const unknownAction = await call('manage_assistant_operation', { action: 'explode' });
    expect(unknownAction.result.isError).toBe(true);
    expect((unknownAction.json.error as { message: string }).message).toContain('action');

    // Nothing of the refused calls was recorded: still the one operation.
    expect((await tenant.context(conversationId)).body.operations).toHaveLength(1);
    expect(clientErrors).toEqual([]);
    expect(stderr.join('')).toContain(`serving conversation ${conversationId}`);
  });
});

describe('opspad mcp refuses to start', () => {
  let harness: Harness;

  beforeAll(async () => {
    harness = await startHarness('pglite');
  });
  afterAll(async () => {
    await harness.close();
  });

  const start = (args: string[], env: Record<string, string> = {}) => {
    const { OPSPAD_API_KEY: _key, ...inherited } = process.env;
    return run(process.execPath, [BIN, 'mcp', ...args], {
      env: { ...inherited, OPSPAD_URL: harness.url, ...env },
      timeout: 30_000,
    }).then(
      () => ({ code: 0, stdout: '', stderr: '' }),
      (error: { code: number; stdout: string; stderr: string }) => error,
    );
  };

  it('without a conversation or key (usage, exit 2), or with a key opspad refuses (exit 1), printing nothing on stdout', async () => {
    const noConversation = await start(['--key', 'k']);
    expect(noConversation).toMatchObject({ code: 2, stdout: '' });
    expect(noConversation.stderr).toContain('--conversation <uuid>');

    const badConversation = await start(['--conversation', 'not-a-uuid', '--key', 'k']);
    expect(badConversation).toMatchObject({ code: 2, stdout: '' });
    expect(badConversation.stderr).toContain('must be a UUID');

    const badKey = await start(['--conversation', randomUUID()], { OPSPAD_API_KEY: 'opspad_not_a_key' });
    expect(badKey).toMatchObject({ code: 1, stdout: '' });
    expect(badKey.stderr).toMatch(/GET \/v1\/tools failed with 401/);
  });
});
