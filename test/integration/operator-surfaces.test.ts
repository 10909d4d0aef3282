/**
 * What operators and integrators see, with the jobs in Redis and then in Postgres: Bull Board
 * (queues, jobs, log lines) and /metrics behind basic auth, health and readiness, job payloads
 * that carry ids only, and the webhook handler end to end through the workers against a real
 * local HTTP server.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { webhookSigningSecrets } from '../../src/store/index.ts';
import { type Harness, ids, QUEUE_BACKENDS, startHarness, type Tenant } from '../helpers/harness.ts';
import { finished, waitForProgress } from '../helpers/wait.ts';

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
    expect(api.body.queues.map((q) => q.name).sort()).toEqual(['batches-demo', 'batches-webhook', 'reorganize']);

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
    }>('/admin/queues/api/queues?activeQueue=batches-demo&status=completed&page=1&jobsPerPage=50', {
      headers: { authorization: harness.adminAuthorization },
    });
    const demo = listed.body.queues.find((q) => q.name === 'batches-demo');
    expect(demo?.counts.completed).toBeGreaterThan(0);
    expect(demo?.jobs.length).toBeGreaterThan(0);
    // A job that handled a batch (a lane's last job, which found nothing left, logs nothing).
    const job = demo?.jobs.find((j) => j.data.operation_id === operationId && typeof j.progress === 'object');
    expect(job).toBeDefined();
    const logs = await harness.request<string[]>(
      `/admin/queues/api/queues/batches-demo/${encodeURIComponent(job?.id ?? '')}/logs`,
      { headers: { authorization: harness.adminAuthorization } },
    );
    expect(logs.status).toBe(200);
    expect(logs.body.join('\n')).toMatch(/(lane \d+ step \d+|operation completed): \d+ completed/);
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
