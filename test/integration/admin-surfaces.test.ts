/**
 * The operator surfaces' walls (postgres): every response of Bull Board, the operations page and
 * /metrics (the 401 included) forbids framing (X-Frame-Options, CSP frame-ancestors) and no
 * response names the framework; Bull Board's changes pass the operator page's Origin check; and
 * OPSPAD_ADMIN_READONLY makes both read-only — the board hides its buttons and the server refuses
 * the changes, the operations page has no buttons and refuses its POSTs.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, ids, startHarness } from '../helpers/harness.ts';
import { type RawClient, type RawResponse, rawClient } from '../helpers/raw-http.ts';

const QUEUE = 'reorganize';

function expectOperatorHeaders(response: RawResponse, label: string) {
  expect(response.headers['x-frame-options'], label).toBe('DENY');
  expect(String(response.headers['content-security-policy']), label).toContain("frame-ancestors 'none'");
  expect(response.headers['x-content-type-options'], label).toBe('nosniff');
  expect(response.headers['x-powered-by'], label).toBeUndefined();
}

async function setUp(readOnly: boolean) {
  const harness = await startHarness('postgres', { env: { OPSPAD_ADMIN_READONLY: String(readOnly) } });
  const client = rawClient(harness.url);
  const tenant = await harness.newTenant();
  const conversation = randomUUID();
  const created = await tenant.op(conversation, {
    action: 'create',
    operation_type: 'follow_up',
    total_items: 2,
    item_ids: ids(2),
  });
  return { harness, client, tenant, operationId: created.body.operation_id as string };
}

describe('operator surfaces, read-write (postgres)', () => {
  let harness: Harness;
  let client: RawClient;
  let operationId: string;
  let apiKey: string;

  beforeAll(async () => {
    const set = await setUp(false);
    ({ harness, client, operationId } = set);
    apiKey = set.tenant.apiKey;
  });
  afterAll(async () => {
    client?.close();
    await harness?.close();
  });

  const admin = (method: string, path: string, headers: Record<string, string> = {}) =>
    client.send({ method, path, headers: { authorization: harness.adminAuthorization, ...headers } });
  const queuePaused = async () => {
    const queue = harness.service.reorganizeQueue.queue;
    return queue.isPaused();
  };

  it('forbid framing on every operator response, the sign-in refusal included, and name no framework', async () => {
    const paths = [
      '/admin/operations',
      `/admin/operations/${operationId}`,
      '/admin/queues',
      '/admin/queues/api/queues',
      '/metrics',
    ];
    for (const path of paths) {
      expectOperatorHeaders(await admin('GET', path), path);
      const anonymous = await client.send({ method: 'GET', path });
      expect(anonymous.status, path).toBe(401);
      expectOperatorHeaders(anonymous, `${path} (401)`);
    }
    const page = await admin('GET', '/admin/operations');
    expect(String(page.headers['content-security-policy'])).toContain("default-src 'none'");
    for (const response of [
      await client.send({ method: 'GET', path: '/healthz' }),
      await client.send({ method: 'GET', path: '/v1/tools', headers: { authorization: `Bearer ${apiKey}` } }),
      await client.send({ method: 'GET', path: '/no/such/route' }),
    ]) {
      expect(response.headers['x-powered-by']).toBeUndefined();
    }
  });

  it("refuses Bull Board's changes unless they come from the board itself", async () => {
    const pause = `/admin/queues/api/queues/${QUEUE}/pause`;
    const forged: Record<string, string>[] = [
      {},
      { origin: 'https://evil.example' },
      { referer: 'https://evil.example/page' },
      { origin: 'null' },
      // A browser says where the request really comes from, whatever Origin claims.
      { origin: harness.url, 'sec-fetch-site': 'cross-site' },
      { origin: harness.url, 'sec-fetch-site': 'same-site' },
    ];
    for (const headers of forged) {
      for (const method of ['PUT', 'POST', 'DELETE', 'PATCH']) {
        const response = await admin(method, pause, headers);
        const label = `${method} ${JSON.stringify(headers)}`;
        expect(response.status, label).toBe(403);
        expect((response.json as { error: { code: string } }).error.code, label).toBe('forbidden');
        expectOperatorHeaders(response, label);
      }
    }
    expect(await queuePaused()).toBe(false);

    const same = { origin: harness.url, 'sec-fetch-site': 'same-origin' };
    expect((await admin('PUT', pause, same)).status).toBe(200);
    expect(await queuePaused()).toBe(true);
    expect((await admin('PUT', `/admin/queues/api/queues/${QUEUE}/resume`, { origin: harness.url })).status).toBe(200);
    expect(await queuePaused()).toBe(false);
  });

  it('shows the operations page with its buttons', async () => {
    const page = await admin('GET', '/admin/operations');
    expect(page.text).toContain(`action="/admin/operations/${operationId}/pause"`);
    expect(page.text).not.toContain('Read-only');
  });
});

describe('operator surfaces, read-only (postgres)', () => {
  let harness: Harness;
  let client: RawClient;
  let operationId: string;

  beforeAll(async () => {
    ({ harness, client, operationId } = await setUp(true));
  });
  afterAll(async () => {
    client?.close();
    await harness?.close();
  });

  const sameOrigin = () => ({
    authorization: harness.adminAuthorization,
    origin: harness.url,
    referer: `${harness.url}/admin/operations`,
    'sec-fetch-site': 'same-origin',
  });

  it("has Bull Board hide its buttons, and refuses its changes even from the board's own origin", async () => {
    const listed = await client.send({
      method: 'GET',
      path: '/admin/queues/api/queues',
      headers: { authorization: harness.adminAuthorization },
    });
    const queues = (listed.json as { queues: { name: string; readOnlyMode: boolean; allowRetries: boolean }[] }).queues;
    // The batch queues (named by operation type) as much as the others.
    expect(queues.map((q) => q.name)).toEqual(expect.arrayContaining(['demo', 'reorganize']));
    for (const queue of queues) {
      expect(queue, queue.name).toMatchObject({ readOnlyMode: true, allowRetries: false });
    }
    for (const [method, path] of [
      ['PUT', `/admin/queues/api/queues/${QUEUE}/pause`],
      ['PUT', '/admin/queues/api/queues/pause'],
      ['PUT', `/admin/queues/api/queues/${QUEUE}/clean/completed`],
      ['PUT', `/admin/queues/api/queues/${QUEUE}/obliterate`],
      ['POST', `/admin/queues/api/queues/${QUEUE}/add`],
    ] as const) {
      const response = await client.send({ method, path, headers: sameOrigin() });
      expect(response.status, path).toBe(403);
      expect((response.json as { error: { message: string } }).error.message, path).toContain('OPSPAD_ADMIN_READONLY');
    }
    expect(await harness.service.reorganizeQueue.queue.isPaused()).toBe(false);
  });

  it('shows the operations page without buttons, and refuses its POSTs', async () => {
    for (const path of [
      '/admin/operations',
      `/admin/operations/${operationId}`,
      `/admin/operations/${operationId}/cancel`,
    ]) {
      const page = await client.send({ method: 'GET', path, headers: { authorization: harness.adminAuthorization } });
      expect(page.status).toBe(200);
      expect(page.text).toContain(operationId);
      expect(page.text, path).not.toContain('method="post"');
      expect(page.text, path).not.toContain('Cancel…');
    }
    expect(
      (
        await client.send({
          method: 'GET',
          path: `/admin/operations/${operationId}/cancel`,
          headers: { authorization: harness.adminAuthorization },
        })
      ).text,
    ).toContain('Read-only (OPSPAD_ADMIN_READONLY)');
    for (const [action, body] of [
      ['pause', 'action=pause'],
      ['cancel', 'action=cancel&confirm=yes'],
    ]) {
      const response = await client.send({
        method: 'POST',
        path: `/admin/operations/${operationId}/${action}`,
        headers: { ...sameOrigin(), 'content-type': 'application/x-www-form-urlencoded' },
        body,
      });
      expect(response.status, action).toBe(403);
    }
    const rows = await harness.db.query<{ status: string }>('SELECT status FROM assistant_operation WHERE id = $1', [
      operationId,
    ]);
    expect(rows[0]?.status).toBe('active');
  });
});
