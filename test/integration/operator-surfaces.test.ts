/**
 * What operators and integrators see, with the jobs in Redis and then in Postgres: Bull Board
 * (queues, jobs, log lines, each queue's workers) and /metrics behind basic auth, health and readiness, job payloads
 * that carry ids only, and the webhook handler end to end through the workers against a real
 * local HTTP server.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { hostname } from 'node:os';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { demoFails } from '../../src/handlers/demo.ts';
import { webhookSigningSecrets } from '../../src/store/index.ts';
import { type Harness, ids, QUEUE_BACKENDS, startHarness, type Tenant } from '../helpers/harness.ts';
import { eventually, finished, waitForProgress } from '../helpers/wait.ts';

interface Received {
  itemId: string;
  signed: boolean;
}

describe.each(QUEUE_BACKENDS)('operator surfaces and the webhook handler (postgres database, %s queue)', (queue) => {
  let harness: Harness;
  let tenant: Tenant;
  let receiver: Server;
  let receiverUrl: string;
  const received: Received[] = [];
  const flakyAttempts = new Map<string, number>();
  /** The tenant's webhook secret, which the receiver verifies with. */
  let secret = '';

  beforeAll(async () => {
    receiver = createServer(async (req: IncomingMessage, res) => {
      const chunks: Buffer[] = [];
      for await (const chunk of req) {
        chunks.push(chunk as Buffer);
      }
      const body = Buffer.concat(chunks).toString('utf8');
      const itemId = (JSON.parse(body) as { data: { item_id: string } }).data.item_id;
      let signed = true;
      try {
        new Webhook(secret).verify(body, req.headers as Record<string, string>);
      } catch {
        signed = false;
      }
      received.push({ itemId, signed });
      if (itemId.startsWith('bad')) {
        res.writeHead(400).end('no such contact');
      } else if (itemId.startsWith('flaky') && (flakyAttempts.get(itemId) ?? 0) === 0) {
        flakyAttempts.set(itemId, 1);
        res.writeHead(500).end('try again');
      } else {
        res.writeHead(200).end('ok');
      }
    });
    receiver.listen(0, '127.0.0.1');
    await new Promise((resolve) => receiver.once('listening', resolve));
    receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;

    harness = await startHarness('postgres', {
      queue,
      workers: true,
      env: {
        OPSPAD_WEBHOOK_ALLOW: new URL(receiverUrl).host,
        OPSPAD_LEASE_TTL: '5s',
        OPSPAD_JOB_LOCK_TTL: '2s',
      },
    });
    tenant = await harness.newTenant();
    [secret = ''] = await webhookSigningSecrets(harness.db, tenant.organizationId);
  });
  afterAll(async () => {
    await harness.close();
    await new Promise((resolve) => receiver.close(resolve));
  });

  it('signs each webhook, retries a 500, and records a 400 as a permanent failure with its status', async () => {
    const itemIds = ['ok-1', 'ok-2', 'flaky-1', 'bad-1', 'ok-3'];
    const created = await tenant.op(randomUUID(), {
      action: 'create',
      operation_type: 'webhook',
      total_items: itemIds.length,
      item_ids: itemIds,
      query_params: { url: receiverUrl },
    });
    expect(created.body).toMatchObject({ execution: 'background' });
    const operationId = created.body.operation_id as string;
    const end = await waitForProgress(harness.url, tenant, operationId, finished);
    expect(end).toMatchObject({ status: 'completed', completed_count: 4, failed_count: 1 });

    const rows = await harness.db.query<{ item_id: string; status: string; reason: string | null }>(
      'SELECT item_id, status, reason FROM assistant_operation_item WHERE operation_id = $1 ORDER BY ordinal',
      [operationId],
    );
    expect(rows.find((r) => r.item_id === 'flaky-1')?.status).toBe('completed');
    expect(rows.find((r) => r.item_id === 'bad-1')).toMatchObject({ status: 'failed' });
    expect(rows.find((r) => r.item_id === 'bad-1')?.reason).toBe('HTTP 400 from the receiver');
    expect(received.filter((r) => r.itemId === 'flaky-1')).toHaveLength(2);
    expect(received.filter((r) => r.itemId === 'bad-1')).toHaveLength(1);
    expect(received.every((r) => r.signed)).toBe(true);
  });

  it('keeps only ids in the job payloads stored in the queue', async () => {
    const created = await tenant.op(randomUUID(), {
      action: 'create',
      operation_type: 'demo',
      total_items: 50,
      item_ids: ids(50, 'secret-item'),
      batch_size: 10,
      query_params: { latency_ms: 1, api_token: 'do-not-store-me' },
    });
    const operationId = created.body.operation_id as string;
    await waitForProgress(harness.url, tenant, operationId, finished);
    const queue = harness.service.dispatcher.queues.find((q) => q.name === 'batches-demo');
    const jobs = (await queue?.getJobs(['completed', 'waiting', 'active', 'delayed'])) ?? [];
    const mine = jobs.filter((job) => job.data.operation_id === operationId);
    expect(mine.length).toBeGreaterThan(0);
    for (const job of mine) {
      expect(Object.keys(job.data).sort()).toEqual([
        'conversation_id',
        'epoch',
        'lane',
        'operation_id',
        'operation_type',
        'organization_id',
        'seq',
      ]);
      expect(JSON.stringify(job.data)).not.toMatch(/secret-item|do-not-store-me/);
    }
    // Each job tells the board which operation it moved, and how far.
    const progressed = mine.find((job) => typeof job.progress === 'object');
    expect(progressed?.progress).toMatchObject({ operation_id: operationId, total: 50 });
  });

  it('puts Bull Board behind basic auth and lists every queue', async () => {
    const anonymous = await fetch(`${harness.url}/admin/queues`);
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers.get('www-authenticate')).toMatch(/^Basic/);
    const wrong = await fetch(`${harness.url}/admin/queues/api/queues`, {
      headers: { authorization: `Basic ${Buffer.from('admin:wrong').toString('base64')}` },
    });
    expect(wrong.status).toBe(401);

    const page = await fetch(`${harness.url}/admin/queues`, { headers: { authorization: harness.adminAuthorization } });
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('<html');
    const api = await harness.request<{ queues: { name: string }[] }>('/admin/queues/api/queues', {
      headers: { authorization: harness.adminAuthorization },
    });
    expect(api.status).toBe(200);
    // Batch queues go by their operation type (/admin/queues/queue/demo), the others by name.
    expect(api.body.queues.map((q) => q.name).sort()).toEqual(['demo', 'reorganize', 'webhook']);

    // The jobs of a queue, each with the operation it moved and its log lines.
    const created = await tenant.op(randomUUID(), {
      action: 'create',
      operation_type: 'demo',
      total_items: 20,
      item_ids: ids(20, 'board'),
      batch_size: 10,
    });
    const operationId = created.body.operation_id as string;
    await waitForProgress(harness.url, tenant, operationId, finished);
    const listed = await harness.request<{
      queues: {
        name: string;
        counts: Record<string, number>;
        jobs: { id: string; data: { operation_id?: string }; progress: unknown }[];
      }[];
    }>('/admin/queues/api/queues?activeQueue=demo&status=completed&page=1&jobsPerPage=50', {
      headers: { authorization: harness.adminAuthorization },
    });
    const demo = listed.body.queues.find((q) => q.name === 'demo');
    expect(demo?.counts.completed).toBeGreaterThan(0);
    expect(demo?.jobs.length).toBeGreaterThan(0);
    // A job that handled a batch (a lane's last job, which found nothing left, logs nothing).
    const job = demo?.jobs.find((j) => j.data.operation_id === operationId && typeof j.progress === 'object');
    expect(job).toBeDefined();
    const logs = await harness.request<string[]>(
      `/admin/queues/api/queues/demo/${encodeURIComponent(job?.id ?? '')}/logs`,
      { headers: { authorization: harness.adminAuthorization } },
    );
    expect(logs.status).toBe(200);
    expect(logs.body.join('\n')).toMatch(/(lane \d+ step \d+( batch(es)? [\d-]+)?|operation completed): \d+ completed/);
  });

  it('lists the workers of every queue on Bull Board, whichever backend holds the jobs', async () => {
    const auth = { headers: { authorization: harness.adminAuthorization } };
    const listed = await harness.request<{ queues: { name: string; hasWorkers: boolean | null }[] }>(
      '/admin/queues/api/queues',
      auth,
    );
    // Not the board's "No workers" badge (false), nor "cannot tell" (null).
    expect(Object.fromEntries(listed.body.queues.map((q) => [q.name, q.hasWorkers]))).toEqual({
      demo: true,
      reorganize: true,
      webhook: true,
    });
    for (const name of ['demo', 'webhook', 'reorganize']) {
      const { body } = await harness.request<{ workers: { name: string | null; addr: string; age: number }[] | null }>(
        `/admin/queues/api/queues/${name}/workers`,
        auth,
      );
      expect(body.workers?.length, name).toBeGreaterThan(0);
      if (queue === 'postgres') {
        // The one process running workers on this queue schema: this one, its slots on a batch queue.
        const slots = name === 'reorganize' ? '' : ' · \\d+ slots';
        expect(body.workers, name).toEqual([
          {
            id: expect.any(String),
            name: expect.stringMatching(new RegExp(`^pid ${process.pid}${slots}$`)),
            addr: hostname(),
            age: expect.any(Number),
          },
        ]);
      }
    }
  });

  it('says on the board which batches recorded failed items, without failing (or retrying) their jobs', async () => {
    const itemIds = ids(40, 'board-fail');
    // The demo handler fails an item by its id alone: the test knows which ones.
    const failing = itemIds.filter((id) => demoFails(id, 0.3)).length;
    expect(failing).toBeGreaterThan(0);
    const created = await tenant.op(randomUUID(), {
      action: 'create',
      operation_type: 'demo',
      total_items: 40,
      item_ids: itemIds,
      batch_size: 4,
      query_params: { latency_ms: 1, failure_rate: 0.3 },
    });
    const operationId = created.body.operation_id as string;
    const end = await waitForProgress(harness.url, tenant, operationId, finished);
    expect(end).toMatchObject({ failed_count: failing, completed_count: 40 - failing });
    const auth = { headers: { authorization: harness.adminAuthorization } };
    type BoardJob = {
      name: string;
      data: { operation_id?: string };
      returnValue: { failed?: number; leased?: number } | null;
      externalUrl?: { href: string };
    };
    const failedInDb = await harness.db.query<{ n: number }>(
      `SELECT sum(failed_count)::int AS n FROM assistant_operation
       WHERE operation_type = 'demo' AND failed_count > 0 AND updated_at > now() - interval '7 days'`,
    );
    const expected = `${(failedInDb[0]?.n ?? 0).toLocaleString('en-US')} item(s) failed`;
    // The count is read at most once per board poll (5 s) for every queue and viewer.
    const demo = await eventually(
      async () => {
        const listed = await harness.request<{
          queues: { name: string; description?: string; counts: Record<string, number>; jobs: BoardJob[] }[];
        }>('/admin/queues/api/queues?activeQueue=demo&status=completed&page=1&jobsPerPage=100', auth);
        const queue = listed.body.queues.find((q) => q.name === 'demo');
        return queue?.description?.includes(expected) ? queue : undefined;
      },
      { timeoutMs: 20_000, intervalMs: 500, what: `the demo queue's description to say ${expected}` },
    );
    const mine = demo?.jobs.filter((j) => j.data.operation_id === operationId) ?? [];
    const withFailures = mine.filter((j) => (j.returnValue?.failed ?? 0) > 0);
    expect(withFailures.reduce((n, j) => n + (j.returnValue?.failed ?? 0), 0)).toBe(failing);
    for (const job of withFailures) {
      expect(job.name).toMatch(
        new RegExp(`^run-batch · ${job.returnValue?.failed} of ${job.returnValue?.leased} items failed$`),
      );
    }
    // Each job leads to its operation in the operator view.
    expect(mine[0]?.externalUrl?.href).toBe(`/admin/operations/${operationId}`);
    // The queue counts the items its operations failed; BullMQ's own failed count stays out of it.
    expect(demo?.counts.failed ?? 0).toBe(0);
    expect(demo?.description).toMatch(/\d[\d,]* item\(s\) failed in \d+ operation\(s\) in the last 7 days/);
  });

  it("serves the board's page without a request to another host, and with a visible way to the operator view", async () => {
    for (const path of ['/admin/queues', '/admin/queues/queue/demo']) {
      const page = await fetch(`${harness.url}${path}`, { headers: { authorization: harness.adminAuthorization } });
      expect(page.status, path).toBe(200);
      const html = await page.text();
      expect(html, path).toContain('id="root"');
      // No absolute URL (http:, https: or protocol-relative) in any src or href.
      expect(html.match(/(?:src|href)=["']?(?:[a-z]+:)?\/\/[^"' >]*/gi) ?? [], path).toEqual([]);
      expect(html, path).not.toMatch(/fonts\.(googleapis|gstatic)\.com/);
      expect(html, path).toContain('<a href="/admin/operations"');
      const csp = page.headers.get('content-security-policy') ?? '';
      expect(csp).not.toMatch(/https?:/);
    }
    // A link by the BullMQ name, as the board had them, leads to the queue's page.
    const old = await fetch(`${harness.url}/admin/queues/queue/batches-demo?status=failed`, {
      headers: { authorization: harness.adminAuthorization },
      redirect: 'manual',
    });
    expect(old.status).toBe(301);
    expect(old.headers.get('location')).toBe('/admin/queues/queue/demo?status=failed');
  });

  it('serves Prometheus metrics behind the same auth', async () => {
    expect((await fetch(`${harness.url}/metrics`)).status).toBe(401);
    const response = await fetch(`${harness.url}/metrics`, { headers: { authorization: harness.adminAuthorization } });
    expect(response.status).toBe(200);
    const text = await response.text();
    expect(text).toMatch(/opspad_items_recorded_total\{operation_type="webhook",outcome="completed"\} 4/);
    expect(text).toMatch(/opspad_items_recorded_total\{operation_type="webhook",outcome="failed"\} 1/);
    expect(text).toMatch(/opspad_batch_duration_seconds_count\{operation_type="demo"\} \d+/);
    expect(text).toMatch(/opspad_queue_jobs\{queue="batches-demo",state="completed"\} \d+/);
    expect(text).toContain('opspad_lease_expiries_total');
  });

  it('answers health and readiness, naming each dependency', async () => {
    expect((await harness.request('/healthz')).body).toEqual({ status: 'ok' });
    const ready = await harness.request('/readyz');
    expect(ready.status).toBe(200);
    // Each dependency by name: Redis only when the jobs are there.
    const checks = queue === 'redis' ? { postgres: 'ok', redis: 'ok' } : { postgres: 'ok', queue: 'ok' };
    expect(ready.body).toMatchObject({ status: 'ready', checks });
    expect(Object.keys((ready.body as { checks: object }).checks).sort()).toEqual(Object.keys(checks).sort());
  });
});
