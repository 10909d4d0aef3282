/**
 * Bounds on `GET /v1/operations/:id/events` (postgres, the slots counted in Redis and then in the
 * Postgres queue schema; short bounds set through the config): a
 * stream ends soon after its key is revoked, a key holds at most OPSPAD_MAX_STREAMS_PER_KEY
 * streams (429 with Retry-After beyond, the slot freed when one closes, and a dead process's
 * slots lapse), a quiet stream sends heartbeats, and a stream on a paused operation with nothing
 * to say ends with a last event saying why — while one on an active operation stays open.
 */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { streamSlots } from '../../src/api/stream-slots.ts';
import { createLogger } from '../../src/logger.ts';
import { redisCappedLeases } from '../../src/queue/redis-counters.ts';
import { revokeApiKey } from '../../src/store/index.ts';
import { type Harness, harnessPrefix, ids, QUEUE_BACKENDS, startHarness, type Tenant } from '../helpers/harness.ts';
import { deleteQueueKeys } from '../helpers/redis.ts';
import { type EventStream, type Frame, openEventStream } from '../helpers/sse.ts';
import { eventually } from '../helpers/wait.ts';

const MAX_STREAMS = 2;
const IDLE_MS = 400;
const HEARTBEAT_MS = 100;

describe.each(QUEUE_BACKENDS)('event stream bounds (postgres database, %s queue)', (queue) => {
  let harness: Harness;
  const open: EventStream[] = [];

  beforeAll(async () => {
    harness = await startHarness('postgres', {
      queue,
      eventsPollMs: 20,
      env: {
        OPSPAD_MAX_STREAMS_PER_KEY: String(MAX_STREAMS),
        OPSPAD_STREAM_KEY_CHECK: '100ms',
        OPSPAD_STREAM_HEARTBEAT: `${HEARTBEAT_MS}ms`,
        OPSPAD_STREAM_IDLE_TIMEOUT: `${IDLE_MS}ms`,
      },
    });
  });
  afterAll(async () => {
    await Promise.all(open.map((stream) => stream.close()));
    await harness?.close();
  });

  async function operation(tenant: Tenant, { paused = false } = {}): Promise<string> {
    const conversation = randomUUID();
    const created = await tenant.op(conversation, {
      action: 'create',
      operation_type: 'follow_up',
      total_items: 3,
      item_ids: ids(3),
    });
    const operationId = created.body.operation_id as string;
    if (paused) {
      expect((await tenant.op(conversation, { action: 'pause', operation_id: operationId })).status).toBe(200);
    }
    return operationId;
  }

  async function stream(tenant: Tenant, operationId: string): Promise<EventStream> {
    const opened = await openEventStream(`${harness.url}/v1/operations/${operationId}/events`, tenant.apiKey);
    open.push(opened);
    return opened;
  }

  const endOf = (frame: Frame) => JSON.parse(frame.data) as Record<string, unknown>;

  it("ends a stream once its key is revoked, with a last event that says so and nothing of the operation's", async () => {
    const tenant = await harness.newTenant();
    const events = await stream(tenant, await operation(tenant));
    expect(events.status).toBe(200);
    await events.until((f) => f.event === 'progress', 'the first progress');
    expect(await revokeApiKey(harness.db, tenant.apiKey)).not.toBeNull();
    const end = await events.until((f) => f.event === 'end', 'the end event');
    expect(endOf(end)).toEqual({ reason: 'key_revoked', message: 'The API key was revoked; the stream ended.' });
    expect(await events.next()).toBeUndefined();
    expect((await stream(tenant, randomUUID())).status).toBe(401);
  });

  it('refuses a stream beyond the per-key cap with 429 and Retry-After, and frees the slot when one closes', async () => {
    const tenant = await harness.newTenant();
    const operationId = await operation(tenant);
    const held: EventStream[] = [];
    for (let i = 0; i < MAX_STREAMS; i++) {
      const events = await stream(tenant, operationId);
      expect(events.status).toBe(200);
      await events.until((f) => f.event === 'progress');
      held.push(events);
    }
    const refused = await stream(tenant, operationId);
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    const { error } = JSON.parse(refused.text ?? '{}') as { error: { code: string; message: string } };
    expect(error.code).toBe('too_many_streams');
    expect(error.message).toContain('OPSPAD_MAX_STREAMS_PER_KEY');
    // Another organization's key has slots of its own.
    const other = await harness.newTenant();
    expect((await stream(other, await operation(other))).status).toBe(200);

    await held[0]?.close();
    const reopened = await eventually(
      async () => {
        const events = await stream(tenant, operationId);
        return events.status === 200 ? events : undefined;
      },
      { what: 'a slot freed by the closed stream' },
    );
    await reopened.until((f) => f.event === 'progress');
  });

  it('sends heartbeats while there is nothing to say, and keeps a stream on an active operation open', async () => {
    const tenant = await harness.newTenant();
    const events = await stream(tenant, await operation(tenant));
    await events.until((f) => f.event === 'progress');
    // A heartbeat comes only after HEARTBEAT_MS without a write: this many of them span more
    // than the idle bound, which does not apply to an active operation.
    const heartbeats = Math.ceil(IDLE_MS / HEARTBEAT_MS) + 2;
    for (let i = 0; i < heartbeats; i++) {
      const frame = await events.next();
      expect(frame).toEqual({ event: 'comment', data: 'heartbeat' });
    }
  });

  it('ends an idle stream on a paused operation with reason idle, and a finished one with reason finished', async () => {
    const tenant = await harness.newTenant();
    const pausedId = await operation(tenant, { paused: true });
    const idle = await stream(tenant, pausedId);
    const end = endOf(await idle.until((f) => f.event === 'end', 'the idle end'));
    expect(end).toMatchObject({ reason: 'idle', status: 'paused', operation_id: pausedId, remaining_count: 3 });
    expect(end.message).toContain('OPSPAD_STREAM_IDLE_TIMEOUT');
    expect(await idle.next()).toBeUndefined();

    const finishedId = await operation(tenant);
    const finishing = await stream(tenant, finishedId);
    await finishing.until((f) => f.event === 'progress');
    const rows = await tenant.get<{ conversation_id: string }>(`/v1/operations/${finishedId}`);
    await tenant.op(rows.body.conversation_id, { action: 'cancel', operation_id: finishedId });
    const last = endOf(await finishing.until((f) => f.event === 'end', 'the finished end'));
    expect(last).toMatchObject({ reason: 'finished', status: 'cancelled', operation_id: finishedId });
  });
});

describe('stream slots', () => {
  const logger = createLogger('silent');

  it("lapse when a process stops renewing them (it died), so a key's slots are never lost for good", async () => {
    const redis = new Redis(inject('redisUrl'));
    const prefix = harnessPrefix();
    try {
      const slots = streamSlots(redisCappedLeases(redis, prefix), { maxPerKey: 1, leaseMs: 200 }, logger);
      expect(await slots.acquire('key-1')).not.toBeNull();
      expect(await slots.acquire('key-1')).toBeNull();
      // Never renewed nor released, as by a process that died: the lease lapses.
      await eventually(async () => ((await slots.acquire('key-1')) ? true : undefined), { what: 'the lease to lapse' });
    } finally {
      redis.disconnect();
      await deleteQueueKeys(prefix, inject('redisUrl'));
    }
  });

  it('let streams open when Redis does not answer', async () => {
    // A port nothing listens on; no offline queue, so commands fail at once.
    const redis = new Redis({ host: '127.0.0.1', port: 1, lazyConnect: true, enableOfflineQueue: false });
    try {
      const slots = streamSlots(redisCappedLeases(redis, 'unreachable'), { maxPerKey: 1, leaseMs: 1000 }, logger);
      const slot = await slots.acquire('key-1');
      expect(slot).not.toBeNull();
      expect(await slots.acquire('key-1')).not.toBeNull();
      await slot?.renew();
      await slot?.release();
    } finally {
      redis.disconnect();
    }
  });
});
