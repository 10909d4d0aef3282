/**
 * The OpenAPI document: valid OpenAPI 3.1 for a real validator (swagger-parser); the same from
 * /openapi.json and `opspad openapi print`; every route the express app registers is in it and
 * nothing else is; and a tour of every documented operation — through opspad/client and plain
 * requests, refusals included — whose every request and answer validates against it.
 */
import { randomUUID } from 'node:crypto';
import SwaggerParser from '@apidevtools/swagger-parser';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openApiDocument, openApiPath } from '../../src/api/openapi/document.ts';
import { DOCUMENTED_TOOLS } from '../../src/api/openapi/routes.ts';
import { SERVICE_INDEX } from '../../src/api/routes/home.ts';
import { createClient, type OpspadClient } from '../../src/client/index.ts';
import type { ServiceIndex } from '../../src/domain/conversation-output.ts';
import { registeredRoutes } from '../helpers/app-routes.ts';
import { type Harness, ids, startHarness, type Tenant } from '../helpers/harness.ts';
import { createExchangeChecker, type Exchange, recordingFetch } from '../helpers/openapi-check.ts';
import { type CommandRun, runOpspad } from '../helpers/processes.ts';

/** Every "METHOD /template" the document describes. */
function documentedOperations(document: ReturnType<typeof openApiDocument>): string[] {
  return Object.entries(document.paths as Record<string, object>)
    .flatMap(([path, methods]) => Object.keys(methods).map((method) => `${method.toUpperCase()} ${path}`))
    .sort();
}

function printDocument(): Promise<CommandRun> {
  // No setting at all: printing the document reads none.
  return runOpspad(['openapi', 'print'], {});
}

describe('the OpenAPI document', () => {
  const document = openApiDocument();

  it('is valid OpenAPI 3.1', async () => {
    expect(document.openapi).toBe('3.1.0');
    await expect(SwaggerParser.validate(structuredClone(document) as never)).resolves.toBeDefined();
  });

  it('describes every route the app registers, and no route it does not', () => {
    const registered = registeredRoutes();
    const fromRouter = [
      ...registered.routes.map((route) => {
        const [method, path] = route.split(' ') as [string, string];
        return `${method} ${openApiPath(path)}`;
      }),
      // Bull Board is a web app mounted there: its page is what the document lists.
      ...registered.mounts.filter((mount) => mount === '/admin/queues').map((mount) => `GET ${mount}`),
    ];
    const toolPaths = DOCUMENTED_TOOLS.map((name) => `POST /v1/conversations/{conversationId}/tools/${name}`);
    expect(documentedOperations(document)).toEqual([...new Set([...fromRouter, ...toolPaths])].sort());
    // The other mounts are the operator pages' routers, whose routes are listed above.
    expect(registered.mounts).toEqual([
      '/admin/approvals',
      '/admin/bulk-actions',
      '/admin/operations',
      '/admin/organizations',
      '/admin/queues',
      '/metrics',
    ]);
  });

  it('prints the same document with opspad openapi print, without any setting', async () => {
    const run = await printDocument();
    expect(run.code, run.stderr).toBe(0);
    expect(JSON.parse(run.stdout)).toEqual(document);
  });
});

describe('real requests and answers against the document (postgres)', () => {
  let harness: Harness;
  let tenant: Tenant;
  const exchanges: Exchange[] = [];
  let client: OpspadClient;
  const record = recordingFetch(exchanges);

  beforeAll(async () => {
    harness = await startHarness('postgres', { workers: true });
    tenant = await harness.newTenant();
    client = createClient({ baseUrl: harness.url, apiKey: tenant.apiKey, fetch: record });
  });
  afterAll(async () => {
    await harness?.close();
  });

  it('answers GET / with where things are: JSON for a client, a page of links for a browser', async () => {
    const asJson = await fetch(`${harness.url}/`);
    expect(asJson.status).toBe(200);
    expect(asJson.headers.get('vary')).toMatch(/accept/i);
    const index = (await asJson.json()) as ServiceIndex;
    expect(index).toEqual(SERVICE_INDEX);
    // Every link leads somewhere (the API and the operator's pages ask who is calling).
    for (const [name, path] of Object.entries(index.links)) {
      const response = await fetch(`${harness.url}${path}`);
      await response.body?.cancel();
      expect([200, 401], `${name} ${path}`).toContain(response.status);
    }
    const asPage = await fetch(`${harness.url}/`, {
      headers: { accept: 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8' },
    });
    expect(asPage.headers.get('content-type')).toMatch(/^text\/html/);
    expect(asPage.headers.get('content-security-policy')).toContain("default-src 'none'");
    const page = await asPage.text();
    // Relative links: they hold under a path prefix a proxy adds.
    for (const path of Object.values(index.links).filter((path) => path !== index.links.api)) {
      expect(page).toContain(`href="${path.slice(1)}"`);
    }
  });

  it('serves the document at /openapi.json, to any origin', async () => {
    const response = await fetch(`${harness.url}/openapi.json`);
    expect(response.headers.get('access-control-allow-origin')).toBe('*');
    expect(await response.json()).toEqual(openApiDocument());
  });

  it('validates every exchange of a tour of every documented operation', async () => {
    const conversation = randomUUID();
    const settle = (call: Promise<unknown>) =>
      call.then(
        () => {},
        () => {},
      );

    // Tools and operations, with refusals (400, 401, 404, 409).
    await client.tools.list();
    await client.tools.list({ format: 'anthropic' });
    const created = await client.operations.create(conversation, {
      operation_type: 'tour',
      total_items: 3,
      item_ids: ids(3),
      batch_size: 2,
      query_params: { segment: 'leads' },
      notes: 'openapi tour',
    });
    const id = created.operation_id;
    await settle(client.operations.create(conversation, { operation_type: 'bad', total_items: 2, item_ids: ['a'] }));
    await client.operations.progress(conversation);
    await client.operations.update(conversation, {
      operation_id: id,
      completed_ids: ['contact-1'],
      failed: [{ id: 'contact-2', reason: 'opted out' }],
    });
    await settle(client.operations.complete(conversation, { operation_id: id }));
    await client.operations.get(conversation, { operation_id: id, failures_limit: 1 });
    await client.operations.pause(conversation);
    await client.operations.resume(conversation, { operation_id: id });
    await client.operations.complete(conversation, { operation_id: id, force: true });
    const retried = await client.operations.retryFailed(conversation, { operation_id: id });
    await client.operations.cancel(conversation, { operation_id: retried.operation_id });
    await client.operations.status(id);
    await client.operations.list(conversation, { limit: 2 });
    await settle(client.operations.status(randomUUID()));
    await client.operations.finished(id);
    await settle(client.tools.call(conversation, 'no_such_tool' as never, {}));
    await client.tools.call(conversation, 'manage_assistant_operation', { action: 'get', operation_id: id });
    await settle(createClient({ baseUrl: harness.url, apiKey: 'opk_wrong', fetch: record }).context.get(conversation));

    // A background operation, streamed to its end.
    const background = await client.operations.create(conversation, {
      operation_type: 'demo',
      total_items: 20,
      item_ids: ids(20, 'lead'),
      batch_size: 5,
    });
    await client.operations.finished(background.operation_id);
    // Its results, as JSON Lines and as CSV.
    for await (const item of client.operations.results(background.operation_id)) {
      expect(item.status).toBe('completed');
    }
    for await (const chunk of client.operations.resultsFile(background.operation_id, { format: 'csv', failed: true })) {
      expect(chunk).toContain('item_id');
    }

    // Notes and executions.
    const execution = await client.executions.start(conversation);
    await client.notes.write(conversation, { notes: 'first finding' }, { executionId: execution.execution_id });
    await client.notes.read(conversation, { persistent_notes: 'answer in French' });
    await client.executions.traces(execution.execution_id, { after: 0, limit: 5 });
    await client.executions.end(execution.execution_id);

    // The structured scratchpad and the context fragment.
    await client.scratchpad.update(conversation, {
      task: 'Follow up the leads',
      add: {
        facts: [{ text: '3 leads', source_ref: 'crm:search' }],
        refs: [{ id: 'crm:search', kind: 'tool_call', label: 'contacts tagged Lead' }],
      },
    });
    const pad = await client.scratchpad.get(conversation);
    const { version, ...content } = pad.scratchpad;
    await client.scratchpad.put(conversation, { expected_version: version, scratchpad: content, reason: 'tour' });
    await settle(client.scratchpad.put(conversation, { expected_version: 0, scratchpad: {} }));
    await client.scratchpad.versions(conversation, { limit: 2 });
    await client.scratchpad.settings(conversation, { reorganize_every: 5 });
    await client.scratchpad.reorganize(conversation, { reason: 'tour' });
    await client.scratchpad.events(conversation, { after: 0 });
    await client.context.get(conversation);
    await client.context.renders(conversation, { limit: 3 });
    await client.health.live();
    await client.health.ready();

    // The public pages and the operator's.
    const admin = { authorization: harness.adminAuthorization };
    await record(`${harness.url}/`);
    await record(`${harness.url}/`, { headers: { accept: 'text/html,application/xhtml+xml,*/*;q=0.8' } });
    await record(`${harness.url}/openapi.json`);
    await record(`${harness.url}/docs`);
    await record(`${harness.url}/docs/assets/init.js`);
    await record(`${harness.url}/docs/assets/nothing.js`);
    await record(`${harness.url}/metrics`, { headers: admin });
    await record(`${harness.url}/metrics`);
    await record(`${harness.url}/admin/queues`, { headers: admin });
    await record(`${harness.url}/admin/operations?status=completed`, { headers: admin });
    await record(`${harness.url}/admin/operations/${id}`, { headers: admin });
    await record(`${harness.url}/admin/operations/${id}/cancel`, { headers: admin });
    await record(`${harness.url}/admin/operations/assets/operator-view.js`, { headers: admin });
    const [organization] = await harness.db.query<{ name: string }>('SELECT name FROM organization WHERE id = $1', [
      tenant.organizationId,
    ]);
    const limitsUrl = `${harness.url}/admin/organizations/${encodeURIComponent(organization?.name ?? '')}/limits`;
    await record(limitsUrl, { headers: admin });
    await record(`${harness.url}/admin/organizations/nobody/limits`, { headers: admin });
    await record(limitsUrl, {
      method: 'PUT',
      headers: { ...admin, 'content-type': 'application/json' },
      body: JSON.stringify({ max_open_operations: 500 }),
    });
    // A live page's stream: its answer starts, then the page goes away.
    const live = await record(`${harness.url}/admin/operations/stream?ids=${id}&audit_after=0`, { headers: admin });
    await live.body?.cancel();
    await record(`${harness.url}/admin/operations/${background.operation_id}/pause`, {
      method: 'POST',
      headers: { ...admin, origin: harness.url, 'content-type': 'application/x-www-form-urlencoded' },
      body: 'action=pause',
      redirect: 'manual',
    });

    // Approvals: the list, a policy read and set back as it was, a decision on an unknown id.
    const orgName = (
      await harness.db.query<{ name: string }>('SELECT name FROM organization WHERE id = $1', [tenant.organizationId])
    )[0]?.name as string;
    const adminJson = { ...admin, origin: harness.url, 'content-type': 'application/json' };
    await record(`${harness.url}/admin/approvals`, { headers: admin });
    await record(`${harness.url}/admin/approvals/policy/${encodeURIComponent(orgName)}`, { headers: admin });
    await record(`${harness.url}/admin/approvals/policy/${encodeURIComponent(orgName)}`, {
      method: 'PUT',
      headers: adminJson,
      body: JSON.stringify({ approve_above: null }),
    });
    await record(`${harness.url}/admin/approvals/${randomUUID()}/approve`, { method: 'POST', headers: adminJson });
    await record(`${harness.url}/v1/operations/${randomUUID()}/approval`, {
      method: 'POST',
      headers: { authorization: `Bearer ${tenant.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ decision: 'approve' }),
    });

    // Bulk actions: a preview, one that matches nothing (done at once), its record and the list, a
    // refusal; the operator view's confirmation, its button and the progress page.
    const nothing = { org: orgName, type: 'no_such_type' };
    const bulkUrl = `${harness.url}/admin/bulk-actions`;
    await record(`${bulkUrl}/preview`, {
      method: 'POST',
      headers: adminJson,
      body: JSON.stringify({ action: 'pause', filter: nothing }),
    });
    const bulk = await record(bulkUrl, {
      method: 'POST',
      headers: adminJson,
      body: JSON.stringify({ action: 'pause', filter: nothing, expected_matched: 0 }),
    });
    const bulkId = ((await bulk.json()) as { id: string }).id;
    await record(`${bulkUrl}/${bulkId}`, { headers: admin });
    await record(`${bulkUrl}?limit=5`, { headers: admin });
    await record(`${bulkUrl}/preview`, {
      method: 'POST',
      headers: adminJson,
      body: JSON.stringify({ action: 'pause', filter: {} }),
    });
    const bulkQuery = `org=${encodeURIComponent(orgName)}&type=no_such_type`;
    await record(`${harness.url}/admin/operations/bulk?action=cancel&${bulkQuery}`, { headers: admin });
    await record(`${harness.url}/admin/operations/bulk`, {
      method: 'POST',
      headers: { ...admin, origin: harness.url, 'content-type': 'application/x-www-form-urlencoded' },
      body: `action=resume&${bulkQuery}&expected_matched=0&confirm=yes`,
      redirect: 'manual',
    });
    await record(`${harness.url}/admin/operations/bulk/${bulkId}`, { headers: admin });

    // MCP over Streamable HTTP, and its protected-resource metadata.
    await record(`${harness.url}/.well-known/oauth-protected-resource/mcp`);
    const mcpHeaders = {
      authorization: `Bearer ${tenant.apiKey}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
    };
    const initialize = {
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'tour', version: '0' } },
    };
    const opened = await record(`${harness.url}/mcp`, {
      method: 'POST',
      headers: mcpHeaders,
      body: JSON.stringify(initialize),
    });
    await opened.text();
    const mcpSession = String(opened.headers.get('mcp-session-id'));
    const listed = await record(`${harness.url}/mcp`, {
      method: 'POST',
      headers: { ...mcpHeaders, 'mcp-session-id': mcpSession },
      body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' }),
    });
    await listed.text();
    await record(`${harness.url}/mcp`, {
      method: 'POST',
      headers: { ...mcpHeaders, 'mcp-session-id': randomUUID() },
      body: JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'tools/list' }),
    });
    await record(`${harness.url}/mcp`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    await record(`${harness.url}/mcp`, { headers: mcpHeaders });
    await record(`${harness.url}/mcp`, { method: 'DELETE', headers: { ...mcpHeaders, 'mcp-session-id': mcpSession } });

    const check = createExchangeChecker(openApiDocument());
    const covered = new Set<string>();
    const problems: string[] = [];
    for (const exchange of exchanges) {
      const result = check(exchange);
      problems.push(...result.problems);
      if (result.operation) {
        covered.add(result.operation);
      }
    }
    expect(problems).toEqual([]);
    expect(exchanges.some((e) => e.status === 409) && exchanges.some((e) => e.status === 401)).toBe(true);
    // Every operation the document describes took part (add a call above for a new route).
    expect([...covered].sort()).toEqual(documentedOperations(openApiDocument()));
  });
});
