/**
 * Load, bounded and on loopback: 50 assistants each driving the reference flow (create 30 items,
 * progress/update in batches of 5, complete) over HTTP for 60 seconds, with exact counters at
 * the end; and a burst of 1,000 idle connections plus a slow client that must not stop the
 * workers. Prints `LOAD …` lines with requests/s, p50/p99 latency and errors.
 */
import { randomUUID } from 'node:crypto';
import { connect, type Socket } from 'node:net';
import { Agent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, ids, startHarness, type Tenant } from '../helpers/harness.ts';
import { eventually } from '../helpers/wait.ts';

const CONVERSATIONS = 50;
const DURATION_MS = 60_000;

function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0;
}

describe('load (postgres)', () => {
  let harness: Harness;

  beforeAll(async () => {
    harness = await startHarness('postgres', { workers: true });
  });
  afterAll(async () => {
    await harness.close();
  });

  it('serves 50 assistants looping the reference flow for 60 s with no error and exact counters', async () => {
    const tenants: Tenant[] = [];
    for (let i = 0; i < CONVERSATIONS; i++) {
      tenants.push(await harness.newTenant());
    }
    const agent = new Agent({ connections: CONVERSATIONS * 2 });
    const latencies: number[] = [];
    let errors = 0;
    const operations: string[] = [];
    const call = async (tenant: Tenant, conversation: string, body: unknown) => {
      const started = performance.now();
      const response = await request(
        `${harness.url}/v1/conversations/${conversation}/tools/manage_assistant_operation`,
        {
          method: 'POST',
          dispatcher: agent,
          headers: { authorization: `Bearer ${tenant.apiKey}`, 'content-type': 'application/json' },
          body: JSON.stringify(body),
        },
      );
      const json = (await response.body.json()) as Record<string, unknown>;
      latencies.push(performance.now() - started);
      if (response.statusCode !== 200) {
        errors++;
        throw new Error(`${response.statusCode}: ${JSON.stringify(json)}`);
      }
      return json;
    };

    const deadline = Date.now() + DURATION_MS;
    const started = Date.now();
    await Promise.all(
      tenants.map(async (tenant) => {
        const conversation = randomUUID();
        while (Date.now() < deadline) {
          const created = await call(tenant, conversation, {
            action: 'create',
            operation_type: 'send_sms',
            total_items: 30,
            item_ids: ids(30),
            batch_size: 5,
          });
          const operationId = created.operation_id as string;
          for (;;) {
            const progress = await call(tenant, conversation, { action: 'progress', operation_id: operationId });
            const batch = progress.batch as string[];
            if (batch.length === 0) {
              break;
            }
            await call(tenant, conversation, {
              action: 'update',
              operation_id: operationId,
              completed_ids: batch.slice(1),
              failed: [{ id: batch[0], reason: 'no phone number' }],
            });
          }
          await call(tenant, conversation, { action: 'complete', operation_id: operationId });
          operations.push(operationId);
        }
      }),
    );
    const seconds = (Date.now() - started) / 1000;
    await agent.close();
    const sorted = [...latencies].sort((a, b) => a - b);
    process.stdout.write(
      `LOAD reference_flow conversations=${CONVERSATIONS} seconds=${seconds.toFixed(1)} requests=${latencies.length} ` +
        `rps=${(latencies.length / seconds).toFixed(0)} p50_ms=${percentile(sorted, 50).toFixed(1)} ` +
        `p99_ms=${percentile(sorted, 99).toFixed(1)} errors=${errors} operations=${operations.length}\n`,
    );
    expect(errors).toBe(0);
    expect(operations.length).toBeGreaterThanOrEqual(CONVERSATIONS);

    // Exact counters: 24 completed and 6 failed in every operation, rows and counters alike.
    const rows = await harness.db.query<{
      id: string;
      completed_count: number;
      failed_count: number;
      status: string;
      c: number;
      f: number;
    }>(
      `SELECT o.id, o.completed_count, o.failed_count, o.status,
              count(*) FILTER (WHERE i.status = 'completed')::int AS c,
              count(*) FILTER (WHERE i.status = 'failed')::int AS f
       FROM assistant_operation o JOIN assistant_operation_item i ON i.operation_id = o.id
       WHERE o.id = ANY($1::uuid[]) GROUP BY o.id`,
      [operations],
    );
    expect(rows).toHaveLength(operations.length);
    for (const row of rows) {
      expect(row).toMatchObject({ status: 'completed', completed_count: 24, failed_count: 6, c: 24, f: 6 });
    }
  });

  it('keeps the workers going through a burst of 1,000 connections and a slow client', async () => {
    const tenant = await harness.newTenant();
    const created = await tenant.op(randomUUID(), {
      action: 'create',
      operation_type: 'demo',
      total_items: 3000,
      item_ids: ids(3000),
      batch_size: 50,
      query_params: { latency_ms: 20 },
    });
    const operationId = created.body.operation_id as string;
    const { port } = new URL(harness.url);
    const sockets: Socket[] = [];
    for (let i = 0; i < 1000; i++) {
      const socket = connect(Number(port), '127.0.0.1');
      socket.on('error', () => {}); // the server may shed idle connections; that is its right
      sockets.push(socket);
    }
    // A slow client: a request whose body trickles in a byte at a time.
    const slow = connect(Number(port), '127.0.0.1');
    slow.on('error', () => {});
    slow.write(
      `POST /v1/conversations/${randomUUID()}/tools/manage_assistant_operation HTTP/1.1\r\nHost: 127.0.0.1\r\n` +
        `Authorization: Bearer ${tenant.apiKey}\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{`,
    );
    const trickle = setInterval(() => slow.write(' '), 50);
    try {
      const started = Date.now();
      await eventually(
        async () => {
          const rows = await harness.db.query<{ status: string }>(
            'SELECT status FROM assistant_operation WHERE id = $1',
            [operationId],
          );
          return rows[0]?.status === 'completed' ? true : undefined;
        },
        { timeoutMs: 120_000, intervalMs: 100, what: 'the operation to complete under the burst' },
      );
      // And the API still answers a normal request meanwhile.
      expect((await tenant.context(randomUUID())).status).toBe(200);
      process.stdout.write(
        `LOAD burst connections=1000 slow_clients=1 items=3000 seconds=${((Date.now() - started) / 1000).toFixed(1)} completed=true\n`,
      );
    } finally {
      clearInterval(trickle);
      slow.destroy();
      for (const socket of sockets) {
        socket.destroy();
      }
    }
  });
});
