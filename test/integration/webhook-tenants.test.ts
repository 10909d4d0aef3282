/**
 * Webhooks end to end (Postgres, Redis, workers, a receiver on 127.0.0.1 allowed through
 * OPSPAD_WEBHOOK_ALLOW): each organization signs with its own secret, so a receiver verifying
 * with organization A's secret (the `standardwebhooks` package, as any receiver would) accepts
 * A's requests and rejects organization B's; a rotation sends both signatures; create refuses
 * an unusable URL or payload with a 400 that names the field and stores nothing; a worker whose
 * guard refuses an address fails the items with "address not allowed" and sends nothing.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { webhookSecretOf, webhookSigningSecrets } from '../../src/store/index.ts';
import { organizationDigest } from '../helpers/digest.ts';
import { type Harness, harnessPrefix, startHarness, type Tenant } from '../helpers/harness.ts';
import { finished, waitForProgress } from '../helpers/wait.ts';

interface Delivery {
  body: string;
  headers: Record<string, string>;
  data: { organization_id: string; operation_id: string; item_id: string };
}

interface Receiver {
  server: Server;
  url: string;
  deliveries: Delivery[];
}

async function startReceiver(): Promise<Receiver> {
  const deliveries: Delivery[] = [];
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) {
      chunks.push(chunk as Buffer);
    }
    const body = Buffer.concat(chunks).toString('utf8');
    const { data } = JSON.parse(body) as { data: Delivery['data'] };
    deliveries.push({ body, headers: req.headers as Record<string, string>, data });
    res.writeHead(200).end('ok');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, deliveries };
}

function verifies(secret: string, delivery: Delivery): boolean {
  try {
    new Webhook(secret).verify(delivery.body, delivery.headers);
    return true;
  } catch {
    return false;
  }
}

async function organizationName(harness: Harness, organizationId: string): Promise<string> {
  const [row] = await harness.db.query<{ name: string }>('SELECT name FROM organization WHERE id = $1', [
    organizationId,
  ]);
  return row?.name ?? '';
}

describe('webhooks signed per organization (postgres)', () => {
  let receiver: Receiver;
  let refusing: Receiver;
  let harness: Harness;
  let orgA: Tenant;
  let orgB: Tenant;
  const prefix = harnessPrefix();

  beforeAll(async () => {
    receiver = await startReceiver();
    refusing = await startReceiver();
    harness = await startHarness('postgres', {
      workers: true,
      env: { OPSPAD_WEBHOOK_ALLOW: new URL(receiver.url).host, OPSPAD_QUEUE_PREFIX: prefix },
    });
    orgA = await harness.newTenant();
    orgB = await harness.newTenant();
  });
  afterAll(async () => {
    await harness.close();
    for (const r of [receiver, refusing]) {
      r.server.closeAllConnections();
      await new Promise((resolve) => r.server.close(resolve));
    }
  });

  async function deliver(tenant: Tenant, itemIds: string[]): Promise<string> {
    const created = await tenant.op(randomUUID(), {
      action: 'create',
      operation_type: 'webhook',
      total_items: itemIds.length,
      item_ids: itemIds,
      query_params: { url: receiver.url, payload: { template: 'spring' }, filter: 'x'.repeat(10_000) },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    const operationId = created.body.operation_id as string;
    const end = await waitForProgress(harness.url, tenant, operationId, finished);
    expect(end).toMatchObject({ status: 'completed', completed_count: itemIds.length });
    return operationId;
  }

  it("gives each organization its own secret: A's receiver accepts A's requests and rejects B's", async () => {
    const [secretA = ''] = await webhookSigningSecrets(harness.db, orgA.organizationId);
    const [secretB = ''] = await webhookSigningSecrets(harness.db, orgB.organizationId);
    expect(secretA).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(secretB).not.toBe(secretA);

    const opA = await deliver(orgA, ['a-1', 'a-2', 'a-3']);
    const opB = await deliver(orgB, ['b-1', 'b-2']);
    const fromA = receiver.deliveries.filter((d) => d.data.operation_id === opA);
    const fromB = receiver.deliveries.filter((d) => d.data.operation_id === opB);
    expect(fromA.map((d) => d.data.item_id).sort()).toEqual(['a-1', 'a-2', 'a-3']);
    expect(fromB).toHaveLength(2);

    expect(fromA.every((d) => verifies(secretA, d))).toBe(true);
    expect(fromA.every((d) => d.data.organization_id === orgA.organizationId)).toBe(true);
    // B's requests are correctly signed, but with B's secret: A's receiver refuses them.
    expect(fromB.some((d) => verifies(secretA, d))).toBe(false);
    expect(fromB.every((d) => verifies(secretB, d) && d.data.organization_id === orgB.organizationId)).toBe(true);
    // The 10 KB filter stays home (query_params may hold 16 KiB): each body holds what the receiver needs.
    expect(Math.max(...[...fromA, ...fromB].map((d) => d.body.length))).toBeLessThan(500);
  });

  it('sends both signatures during a rotation, each verifying on its own', async () => {
    const orgC = await harness.newTenant();
    const name = await organizationName(harness, orgC.organizationId);
    const before = await webhookSecretOf(harness.db, name, { rotate: false, graceMs: 0 });
    const rotated = await webhookSecretOf(harness.db, name, { rotate: true, graceMs: 3_600_000 });
    expect(rotated?.secret).not.toBe(before?.secret);
    expect(rotated?.previous).toHaveLength(1);
    expect(rotated?.previous[0]?.expires_at.getTime()).toBeGreaterThan(Date.now() + 3_500_000);

    const op = await deliver(orgC, ['c-1']);
    const [delivery] = receiver.deliveries.filter((d) => d.data.operation_id === op);
    expect(delivery?.headers['webhook-signature']?.split(' ')).toHaveLength(2);
    expect(delivery && verifies(rotated?.secret ?? '', delivery)).toBe(true);
    expect(delivery && verifies(before?.secret ?? '', delivery)).toBe(true);
    const [secretA = ''] = await webhookSigningSecrets(harness.db, orgA.organizationId);
    expect(delivery && verifies(secretA, delivery)).toBe(false);
  });

  it.each([
    ['a private address', { url: 'http://10.0.0.1/hook' }, 'query_params.url', 'private'],
    ['cloud metadata', { url: 'http://169.254.169.254/latest/meta-data/' }, 'query_params.url', 'link-local'],
    ['localhost', { url: 'http://localhost:8080/' }, 'query_params.url', 'loopback'],
    ['a port the allow list does not name', { url: 'http://127.0.0.1:1/hook' }, 'query_params.url', 'loopback'],
    ['credentials', { url: 'https://ops:pa55word@hooks.example.com/' }, 'query_params.url', 'user name or password'],
    ['an ftp URL', { url: 'ftp://hooks.example.com/' }, 'query_params.url', 'http(s) URL'],
    [
      'a 5 KB payload',
      { url: 'https://hooks.example.com/', payload: { t: 'x'.repeat(5000) } },
      'query_params.payload',
      '4096',
    ],
  ])(
    'refuses a webhook operation with %s: 400 naming the field, nothing stored',
    async (_l, queryParams, field, phrase) => {
      const before = await organizationDigest(harness.db, orgA.organizationId);
      const response = await orgA.op(randomUUID(), {
        action: 'create',
        operation_type: 'webhook',
        total_items: 1,
        item_ids: ['x'],
        query_params: queryParams,
      });
      expect(response.status).toBe(400);
      const error = response.body.error as { code: string; message: string; details: { issues: { field: string }[] } };
      expect(error.code).toBe('validation_failed');
      expect(error.details.issues.map((issue) => issue.field)).toEqual([field]);
      expect(error.message).toContain(phrase);
      expect(error.message).not.toContain('pa55word');
      expect(await organizationDigest(harness.db, orgA.organizationId)).toEqual(before);
    },
  );

  it('lets an assistant-run operation keep any query_params: only workers call the URL', async () => {
    const response = await orgA.op(randomUUID(), {
      action: 'create',
      operation_type: 'webhook',
      execution: 'assistant',
      total_items: 1,
      item_ids: ['x'],
      query_params: { url: 'http://10.0.0.1/' },
    });
    expect(response.status).toBe(200);
  });

  it('fails the items of an operation whose address a worker refuses, and sends nothing', async () => {
    // This service's API allows the refusing receiver; the workers (the harness above, sharing
    // the queue prefix and database) do not: "address not allowed" must come from the worker.
    const api = await startHarness('postgres', {
      workers: false,
      env: { OPSPAD_WEBHOOK_ALLOW: new URL(refusing.url).host, OPSPAD_QUEUE_PREFIX: prefix },
    });
    try {
      const tenant = await api.newTenant();
      const created = await tenant.op(randomUUID(), {
        action: 'create',
        operation_type: 'webhook',
        total_items: 2,
        item_ids: ['r-1', 'r-2'],
        query_params: { url: refusing.url },
      });
      expect(created.status, JSON.stringify(created.body)).toBe(200);
      const operationId = created.body.operation_id as string;
      const end = await waitForProgress(api.url, tenant, operationId, finished);
      expect(end).toMatchObject({ status: 'completed', completed_count: 0, failed_count: 2 });
      const reasons = await api.db.query<{ reason: string }>(
        'SELECT reason FROM assistant_operation_item WHERE operation_id = $1',
        [operationId],
      );
      expect(reasons.map((r) => r.reason)).toEqual(['address not allowed', 'address not allowed']);
      expect(refusing.deliveries).toEqual([]);
    } finally {
      await api.close();
    }
  });
});
