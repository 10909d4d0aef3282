/**
 * `/mcp` as hosted MCP clients see it: the SDK's own Streamable HTTP client against the API's
 * process and port, with an API key.
 *
 * - The seed flow (create, progress, update, complete) runs over it, each call landing in the
 *   session's conversation, with the counts at the database.
 * - A session is a row: a second API process over the same database continues it, with what it
 *   learnt (an omitted operation_id filled in); DELETE ends it; an organization keeps at most
 *   OPSPAD_MCP_MAX_SESSIONS of them, and an idle one ends.
 * - Two organizations' keys never see each other's operations, conversations or sessions: a
 *   foreign id is answered byte for byte as a random one.
 * - No key, a bad key, a revoked key: 401 with `WWW-Authenticate` naming the protected-resource
 *   metadata, which is served; a foreign Host or Origin: 403.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findMcpSession, openMcpSession, revokeApiKey, touchMcpSession } from '../../src/store/index.ts';
import { type Harness, ids, startHarness, type Tenant } from '../helpers/harness.ts';
import { connectMcp, type McpHttpSession } from '../helpers/mcp-http.ts';
import { type RawClient, rawClient } from '../helpers/raw-http.ts';

const INIT = {
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '0' } },
};
const MCP_HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };

describe('/mcp over Streamable HTTP', () => {
  let harness: Harness;
  let second: Harness;
  let a: Tenant;
  let b: Tenant;
  let raw: RawClient;
  const sessions: McpHttpSession[] = [];
  const connect = async (...args: Parameters<typeof connectMcp>) => {
    const session = await connectMcp(...args);
    sessions.push(session);
    return session;
  };
  const mcpUrl = () => `${harness.url}/mcp`;

  beforeAll(async () => {
    harness = await startHarness('postgres');
    second = await startHarness('postgres');
    a = await harness.newTenant();
    b = await harness.newTenant();
    raw = rawClient(harness.url);
  });

  afterAll(async () => {
    for (const session of sessions) {
      await session.close().catch(() => undefined);
    }
    raw?.close();
    await second?.close();
    await harness?.close();
  });

  const operationRow = async (operationId: string) =>
    (
      await harness.db.query<{
        status: string;
        completed_count: number;
        failed_count: number;
        conversation_id: string;
        organization_id: string;
      }>(
        'SELECT status, completed_count, failed_count, conversation_id, organization_id FROM assistant_operation WHERE id = $1',
        [operationId],
      )
    )[0];

  it('runs the seed flow: create, progress, update, complete', async () => {
    const session = await connect(mcpUrl(), a.apiKey);
    const tools = (await session.client.listTools()).tools.map((tool) => tool.name).sort();
    expect(tools).toEqual([
      'manage_assistant_operation',
      'read_from_scratchpad',
      'read_working_memory',
      'update_scratchpad',
      'write_to_scratchpad',
    ]);
    const created = await session.call('manage_assistant_operation', {
      action: 'create',
      operation_type: 'send_followup',
      total_items: 6,
      item_ids: ids(6),
      batch_size: 3,
      execution: 'assistant',
    });
    expect(created.result.isError).toBeFalsy();
    const operationId = String(created.json.operation_id);
    const home = (await operationRow(operationId))?.conversation_id;

    for (let batch = 0; batch < 2; batch++) {
      const progress = await session.call('manage_assistant_operation', {
        action: 'progress',
        operation_id: operationId,
      });
      const items = progress.json.batch as string[];
      expect(items).toHaveLength(3);
      const updated = await session.call('manage_assistant_operation', {
        action: 'update',
        operation_id: operationId,
        completed_ids: batch === 0 ? items : items.slice(1),
        failed: batch === 0 ? [] : [{ id: items[0], reason: 'no phone number' }],
      });
      expect(updated.result.isError).toBeFalsy();
    }
    const completed = await session.call('manage_assistant_operation', {
      action: 'complete',
      operation_id: operationId,
    });
    expect(completed.result.isError).toBeFalsy();
    expect(await operationRow(operationId)).toMatchObject({
      status: 'completed',
      completed_count: 5,
      failed_count: 1,
      conversation_id: home,
      organization_id: a.organizationId,
    });
    // The scratchpad and the working memory are the session's conversation's.
    await session.call('write_to_scratchpad', { notes: 'contact-4 has no phone number' });
    const notes = await harness.db.query<{ conversation_id: string }>(
      'SELECT conversation_id FROM scratchpad_note WHERE organization_id = $1',
      [a.organizationId],
    );
    expect(notes.map((n) => n.conversation_id)).toEqual([home]);
  });

  it('keeps a session in the database: another API process continues it; DELETE ends it', async () => {
    const session = await connect(mcpUrl(), a.apiKey);
    const created = await session.call('manage_assistant_operation', {
      action: 'create',
      operation_type: 'send_followup',
      total_items: 4,
      item_ids: ids(4),
      batch_size: 2,
      execution: 'assistant',
    });
    const operationId = String(created.json.operation_id);
    // The other process has never seen this session; the row tells it the last operation.
    const elsewhere = await connect(`${second.url}/mcp`, a.apiKey, { sessionId: session.sessionId });
    const progress = await elsewhere.call('manage_assistant_operation', { action: 'progress' });
    expect(progress.result.isError).toBeFalsy();
    expect(progress.json.operation_id).toBe(operationId);
    expect(progress.json.batch).toEqual(['contact-1', 'contact-2']);

    await session.transport.terminateSession();
    const after = await raw.send({
      method: 'POST',
      path: '/mcp',
      headers: { ...MCP_HEADERS, authorization: `Bearer ${a.apiKey}`, 'mcp-session-id': session.sessionId },
      body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' }),
    });
    expect(after.status).toBe(404);
  });

  it('keeps at most OPSPAD_MCP_MAX_SESSIONS sessions per organization, closing the least recently used', async () => {
    const tenant = await harness.newTenant();
    const bounds = { maxSessions: 2, idleMs: 3_600_000 };
    const open = () =>
      openMcpSession(
        harness.db,
        tenant.organizationId,
        { homeConversationId: randomUUID(), pinned: false, clientName: null },
        bounds,
      );
    const first = await open();
    const second = await open();
    await touchMcpSession(harness.db, tenant.organizationId, first); // now the second is the least recently used
    const third = await open();
    const live = async (id: string) =>
      (await findMcpSession(harness.db, tenant.organizationId, id, bounds.idleMs)) !== null;
    expect([await live(first), await live(second), await live(third)]).toEqual([true, false, true]);
    expect(await findMcpSession(harness.db, tenant.organizationId, first, 1)).toBeNull(); // idle longer than 1 ms
  });

  it('pins a conversation chosen at initialize', async () => {
    const conversationId = randomUUID();
    const session = await connect(`${mcpUrl()}?conversation=${conversationId}`, a.apiKey);
    const created = await session.call('manage_assistant_operation', {
      action: 'create',
      operation_type: 'send_followup',
      total_items: 2,
      item_ids: ids(2),
      execution: 'assistant',
    });
    expect((await operationRow(String(created.json.operation_id)))?.conversation_id).toBe(conversationId);
    expect((await a.context(conversationId)).body.operations).toHaveLength(1);
  });

  it('never shows one organization another’s operations, conversations or sessions', async () => {
    const sessionA = await connect(mcpUrl(), a.apiKey);
    const created = await sessionA.call('manage_assistant_operation', {
      action: 'create',
      operation_type: 'secret_work',
      total_items: 3,
      item_ids: ids(3),
      execution: 'assistant',
    });
    const foreign = String(created.json.operation_id);
    const sessionB = await connect(mcpUrl(), b.apiKey);
    const random = randomUUID();
    for (const action of ['get', 'progress', 'pause', 'cancel']) {
      const theirs = await sessionB.call('manage_assistant_operation', { action, operation_id: foreign });
      const none = await sessionB.call('manage_assistant_operation', { action, operation_id: random });
      expect(theirs.result.isError).toBe(true);
      expect(theirs.text.replaceAll(foreign, random)).toBe(none.text);
    }
    expect((await operationRow(foreign))?.status).toBe('active');
    const memory = await sessionB.call('read_working_memory');
    expect(memory.text).not.toContain(foreign);
    expect(memory.text).not.toContain('secret_work');

    // A's session id with B's key is answered as a random session id.
    const asB = (sessionId: string) =>
      raw.send({
        method: 'POST',
        path: '/mcp',
        headers: { ...MCP_HEADERS, authorization: `Bearer ${b.apiKey}`, 'mcp-session-id': sessionId },
        body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' }),
      });
    const stolen = await asB(sessionA.sessionId);
    const unknown = await asB(randomUUID());
    expect(stolen.status).toBe(404);
    expect([stolen.status, stolen.text]).toEqual([unknown.status, unknown.text]);
    // Nor can B end it.
    const endAs = (sessionId: string) =>
      raw.send({
        method: 'DELETE',
        path: '/mcp',
        headers: { ...MCP_HEADERS, authorization: `Bearer ${b.apiKey}`, 'mcp-session-id': sessionId },
      });
    const ended = await endAs(sessionA.sessionId);
    const endedUnknown = await endAs(randomUUID());
    expect([ended.status, ended.text]).toEqual([endedUnknown.status, endedUnknown.text]);
    expect((await sessionA.call('read_working_memory')).result.isError).toBeFalsy();
  });

  it('answers no key, a bad key and a revoked key with 401 and the protected-resource metadata', async () => {
    const revoked = await harness.newTenant();
    expect(await revokeApiKey(harness.db, revoked.apiKey)).not.toBeNull();
    const tries: [string, Record<string, string>][] = [
      ['no key', {}],
      ['bad key', { authorization: 'Bearer opk_not-a-key' }],
      ['revoked key', { authorization: `Bearer ${revoked.apiKey}` }],
    ];
    for (const [what, headers] of tries) {
      const answer = await raw.send({
        method: 'POST',
        path: '/mcp',
        headers: { ...MCP_HEADERS, ...headers },
        body: JSON.stringify(INIT),
      });
      expect(answer.status, what).toBe(401);
      const challenge = String(answer.headers['www-authenticate']);
      expect(challenge, what).toMatch(/^Bearer /);
      expect(challenge, what).toContain(`resource_metadata="${harness.url}/.well-known/oauth-protected-resource/mcp"`);
      expect(challenge.includes('error="invalid_token"'), what).toBe(what !== 'no key');
    }
    const metadata = await harness.request<{ resource: string }>('/.well-known/oauth-protected-resource/mcp');
    expect(metadata.status).toBe(200);
    expect(metadata.body.resource).toBe(`${harness.url}/mcp`);
  });

  it('refuses a foreign Host or Origin (DNS rebinding), and serves its own', async () => {
    const headers = { ...MCP_HEADERS, authorization: `Bearer ${a.apiKey}` };
    const port = new URL(harness.url).port;
    const send = (extra: Record<string, string>) =>
      raw.send({ method: 'POST', path: '/mcp', headers: { ...headers, ...extra }, body: JSON.stringify(INIT) });
    expect((await send({ host: 'evil.example.com' })).status).toBe(403);
    expect((await send({ host: `evil.example.com:${port}` })).status).toBe(403);
    expect((await send({ origin: 'http://evil.example.com' })).status).toBe(403);
    expect((await send({ host: `localhost:${port}`, origin: `http://localhost:${port}` })).status).toBe(200);
    expect((await send({})).status).toBe(200);
    // Nothing was opened by the refused requests: only the accepted initializes left sessions.
  });
});
