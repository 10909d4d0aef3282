/**
 * Items of a batch run at once (a handler's itemConcurrency, the webhook's settings), end to end
 * on Postgres and Redis with workers in this process: handlers that count their calls in flight
 * hold the first calls until exactly the declared number is in flight (batches at once × items
 * of a batch at once), so reaching it is shown by the gate opening and exceeding it by the
 * peak; every item is recorded exactly once in the ledger. Then the built-in webhook handler
 * against a receiver on 127.0.0.1 with 200 requests in flight, each delivery signed.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ItemError, type ItemHandler } from '../../src/handlers/types.ts';
import { webhookSigningSecrets } from '../../src/store/index.ts';
import { type Harness, ids, startHarness, type Tenant } from '../helpers/harness.ts';
import { finished, waitForProgress } from '../helpers/wait.ts';

/** Holds the first `size` callers until the last of them arrives, then lets everyone through. */
function gate(size: number) {
  const held: (() => void)[] = [];
  let open = false;
  return {
    pass(signal?: AbortSignal): Promise<void> {
      if (open) {
        return Promise.resolve();
      }
      const passed = new Promise<void>((resolve, reject) => {
        held.push(resolve);
        signal?.addEventListener('abort', () => reject(signal.reason), { once: true });
      });
      if (held.length >= size) {
        open = true;
        for (const release of held.splice(0)) {
          release();
        }
      }
      return passed;
    },
  };
}

/** A handler that counts its calls in flight and per item; ids starting `bad-` fail for good. */
function countingInFlight(type: string, concurrency: number, itemConcurrency: number) {
  const counts = { inFlight: 0, peak: 0, calls: new Map<string, number>() };
  const firstCalls = gate(concurrency * itemConcurrency);
  const handler: ItemHandler = {
    type,
    concurrency,
    itemConcurrency,
    attempts: 1,
    async handle(itemId, ctx) {
      counts.inFlight++;
      counts.peak = Math.max(counts.peak, counts.inFlight);
      counts.calls.set(itemId, (counts.calls.get(itemId) ?? 0) + 1);
      try {
        await firstCalls.pass(ctx.signal);
        await new Promise<void>((resolve) => setImmediate(resolve));
        if (itemId.startsWith('bad-')) {
          throw new ItemError(`${itemId} has no address`);
        }
      } finally {
        counts.inFlight--;
      }
    },
  };
  return { handler, counts };
}

const wide = countingInFlight('inflight_wide', 8, 500);
const narrow = countingInFlight('inflight_narrow', 3, 4);

/** A receiver that answers each request after 20 ms, holding the first WEBHOOK_IN_FLIGHT. */
interface Receiver {
  server: Server;
  url: string;
  deliveries: { body: string; headers: IncomingHttpHeaders }[];
  peak: number;
}

const WEBHOOK_BATCHES = 8;
const WEBHOOK_ITEMS_AT_ONCE = 25;
const WEBHOOK_IN_FLIGHT = WEBHOOK_BATCHES * WEBHOOK_ITEMS_AT_ONCE;

async function startReceiver(): Promise<Receiver> {
  const firstRequests = gate(WEBHOOK_IN_FLIGHT);
  let inFlight = 0;
  const receiver: Receiver = { server: createServer(), url: '', deliveries: [], peak: 0 };
  receiver.server.on('request', async (req, res) => {
    inFlight++;
    receiver.peak = Math.max(receiver.peak, inFlight);
    const chunks: Buffer[] = [];
    for await (const chunk of req) {
      chunks.push(chunk as Buffer);
    }
    receiver.deliveries.push({ body: Buffer.concat(chunks).toString('utf8'), headers: req.headers });
    await firstRequests.pass();
    // The provider's own latency, as a slow SMS or CRM API would answer.
    await new Promise<void>((resolve) => setTimeout(resolve, 20));
    inFlight--;
    res.writeHead(200).end('ok');
  });
  await new Promise<void>((resolve) => receiver.server.listen(0, '127.0.0.1', resolve));
  receiver.url = `http://127.0.0.1:${(receiver.server.address() as AddressInfo).port}/hook`;
  return receiver;
}

describe('items of a batch at once (postgres, redis queue)', () => {
  let harness: Harness;
  let tenant: Tenant;
  let receiver: Receiver;

  beforeAll(async () => {
    receiver = await startReceiver();
    harness = await startHarness('postgres', {
      workers: true,
      handlers: [wide.handler, narrow.handler],
      env: {
        OPSPAD_WEBHOOK_ALLOW: new URL(receiver.url).host,
        OPSPAD_WEBHOOK_CONCURRENCY: String(WEBHOOK_BATCHES),
        OPSPAD_WEBHOOK_ITEM_CONCURRENCY: String(WEBHOOK_ITEMS_AT_ONCE),
      },
    });
    tenant = await harness.newTenant();
  });
  afterAll(async () => {
    await harness?.close();
    receiver.server.closeAllConnections();
    await new Promise((resolve) => receiver.server.close(resolve));
  });

  async function runToEnd(input: Record<string, unknown>) {
    const conversation = randomUUID();
    const created = await tenant.op(conversation, { action: 'create', ...input });
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    const operationId = created.body.operation_id as string;
    const end = await waitForProgress(harness.url, tenant, operationId, finished);
    const states = await harness.db.query<{ status: string; n: number }>(
      'SELECT status, count(*)::int AS n FROM assistant_operation_item WHERE operation_id = $1 GROUP BY status',
      [operationId],
    );
    return { end, states: Object.fromEntries(states.map((s) => [s.status, s.n])) };
  }

  it('runs 4,000 items at once (8 batches × 500) and records each of 10,000 exactly once', async () => {
    const itemIds = ids(10_000, 'lead').map((id, i) => (i % 9 === 4 ? `bad-${id}` : id));
    const bad = itemIds.filter((id) => id.startsWith('bad-'));
    const { end, states } = await runToEnd({
      operation_type: 'inflight_wide',
      total_items: itemIds.length,
      item_ids: itemIds,
      batch_size: 500,
      max_parallel_batches: 8,
    });
    expect(wide.counts.peak).toBe(8 * 500);
    expect(end).toMatchObject({
      status: 'completed',
      completed_count: itemIds.length - bad.length,
      failed_count: bad.length,
      in_flight_count: 0,
    });
    expect(states).toEqual({ completed: itemIds.length - bad.length, failed: bad.length });
    expect(wide.counts.calls.size).toBe(itemIds.length);
    expect([...wide.counts.calls.values()].every((calls) => calls === 1)).toBe(true);
  });

  it('never runs more than batches at once × itemConcurrency, whatever the batch size', async () => {
    const itemIds = ids(800, 'contact');
    const { end, states } = await runToEnd({
      operation_type: 'inflight_narrow',
      total_items: itemIds.length,
      item_ids: itemIds,
      batch_size: 100,
      max_parallel_batches: 8,
    });
    expect(narrow.counts.peak).toBe(3 * 4);
    expect(end).toMatchObject({ status: 'completed', completed_count: 800, failed_count: 0 });
    expect(states).toEqual({ completed: 800 });
    expect([...narrow.counts.calls.values()].every((calls) => calls === 1)).toBe(true);
  });

  it('sends 2,000 webhooks with 200 in flight, each signed with the organization secret', async () => {
    const [secret] = await webhookSigningSecrets(harness.db, tenant.organizationId);
    const itemIds = ids(2000, 'member');
    const { end, states } = await runToEnd({
      operation_type: 'webhook',
      total_items: itemIds.length,
      item_ids: itemIds,
      batch_size: 50,
      max_parallel_batches: 16,
      query_params: { url: receiver.url, payload: { template: 'welcome' } },
    });
    expect(receiver.peak).toBe(WEBHOOK_IN_FLIGHT);
    expect(end).toMatchObject({ status: 'completed', completed_count: 2000, failed_count: 0 });
    expect(states).toEqual({ completed: 2000 });
    expect(receiver.deliveries).toHaveLength(2000);
    const delivered = receiver.deliveries.map((delivery) => {
      const verified = new Webhook(secret as string).verify(delivery.body, delivery.headers as Record<string, string>);
      return (verified as { data: { item_id: string } }).data.item_id;
    });
    expect(new Set(delivered)).toEqual(new Set(itemIds));
    expect(new Set(receiver.deliveries.map((d) => d.headers['webhook-id'])).size).toBe(2000);
  });
});
