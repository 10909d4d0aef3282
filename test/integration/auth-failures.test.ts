/**
 * Failed sign-ins are limited per client address (postgres, OPSPAD_AUTH_FAILURE_LIMIT=3/1h):
 * past the limit, wrong API keys and wrong operator passwords are answered 429 with Retry-After
 * before any database lookup — a right key from that address too, until the window ends. Requests
 * without credentials do not count; the API and the operator pages count apart; the address is
 * the connection's unless OPSPAD_TRUST_PROXY names the proxy; without Redis, sign-ins go on.
 */
import { randomUUID } from 'node:crypto';
import type { Request, Response } from 'express';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { authFailureLimiter } from '../../src/api/auth-failures.ts';
import type { QueueBackendKind } from '../../src/config/env.ts';
import { createLogger } from '../../src/logger.ts';
import { redisWindowCounter } from '../../src/queue/redis-counters.ts';
import { type Harness, QUEUE_BACKENDS, startHarness, type Tenant } from '../helpers/harness.ts';
import { type RawClient, type RawResponse, rawClient } from '../helpers/raw-http.ts';

const LIMIT = 3;
const wrongPassword = `Basic ${Buffer.from('admin:not-the-password').toString('base64')}`;

function expectLimited(response: RawResponse, label: string) {
  expect(response.status, `${label}: ${response.text}`).toBe(429);
  expect(Number(response.headers['retry-after']), label).toBeGreaterThanOrEqual(1);
  const { error } = response.json as { error: { code: string; message: string } };
  expect(error.code, label).toBe('rate_limited');
  expect(error.message, label).toContain('OPSPAD_AUTH_FAILURE_LIMIT');
}

/**
 * A harness with the limit, counting the key lookups its database is asked for. The limit counts
 * in fixed windows, and a test's requests that straddle a window's end are counted in two: an hour
 * makes that sixty times rarer than a minute did (the address of the last test here cannot be
 * changed to run again in the next window, see test/helpers/rate-window.ts).
 */
async function limitedHarness(env: Record<string, string>, queue: QueueBackendKind = 'redis') {
  const harness = await startHarness('postgres', { queue, env: { OPSPAD_AUTH_FAILURE_LIMIT: `${LIMIT}/1h`, ...env } });
  const counter = { lookups: 0 };
  const query = harness.db.query.bind(harness.db);
  harness.db.query = ((text: string, params?: readonly unknown[]) => {
    if (text.includes('FROM api_key WHERE key_hash')) {
      counter.lookups++;
    }
    return query(text, params);
  }) as typeof harness.db.query;
  return { harness, counter, client: rawClient(harness.url), tenant: await harness.newTenant() };
}

// Counted in Redis, or in the Postgres queue schema with no Redis at all.
describe.each(QUEUE_BACKENDS)(
  'failed sign-ins per address, behind a trusted proxy (postgres database, %s queue)',
  (queue) => {
    let harness: Harness;
    let client: RawClient;
    let tenant: Tenant;
    let counter: { lookups: number };

    beforeAll(async () => {
      ({ harness, client, tenant, counter } = await limitedHarness({ OPSPAD_TRUST_PROXY: 'loopback' }, queue));
    });
    afterAll(async () => {
      client?.close();
      await harness?.close();
    });

    /** A request from client `address`, as the proxy on loopback states it. */
    const api = (key: string, address: string) =>
      client.send({
        method: 'GET',
        path: '/v1/tools',
        headers: { authorization: `Bearer ${key}`, 'x-forwarded-for': address },
      });
    const board = (authorization: string | undefined, address: string) =>
      client.send({
        method: 'GET',
        path: '/admin/queues/api/queues',
        headers: { ...(authorization ? { authorization } : {}), 'x-forwarded-for': address },
      });

    it('refuses wrong keys past the limit before looking them up, and a right key from there too', async () => {
      const address = '198.51.100.7';
      expect((await api(tenant.apiKey, address)).status).toBe(200);
      const start = counter.lookups;
      for (let i = 0; i < LIMIT; i++) {
        expect((await api(`opk_wrong-${randomUUID()}`, address)).status).toBe(401);
      }
      // Each of those was looked up (the count sees lookups); from now on, none is.
      expect(counter.lookups).toBe(start + LIMIT);
      const before = counter.lookups;
      for (let i = 0; i < 5; i++) {
        expectLimited(await api(`opk_wrong-${randomUUID()}`, address), `wrong key ${i}`);
      }
      expectLimited(await api(tenant.apiKey, address), 'right key');
      expect(counter.lookups, 'key lookups once limited').toBe(before);
      // Another client behind the same proxy has a count of its own.
      expect((await api(tenant.apiKey, '198.51.100.70')).status).toBe(200);
    });

    it('counts operator passwords apart from API keys, and never a request without credentials', async () => {
      const address = '198.51.100.8';
      for (let i = 0; i < LIMIT * 3; i++) {
        // What a browser sends first, to be asked for a password.
        expect((await board(undefined, address)).status).toBe(401);
      }
      expect((await board(harness.adminAuthorization, address)).status).toBe(200);
      for (let i = 0; i < LIMIT; i++) {
        expect((await board(wrongPassword, address)).status).toBe(401);
      }
      expectLimited(await board(wrongPassword, address), 'wrong password');
      expectLimited(await board(harness.adminAuthorization, address), 'right password');
      // The API from the same address is not locked by the operator's typos.
      expect((await api(tenant.apiKey, address)).status).toBe(200);
    });
  },
);

describe('failed sign-ins per address, without a trusted proxy (postgres)', () => {
  let harness: Harness;
  let client: RawClient;
  let tenant: Tenant;
  let counter: { lookups: number };

  beforeAll(async () => {
    ({ harness, client, tenant, counter } = await limitedHarness({}));
  });
  afterAll(async () => {
    client?.close();
    await harness?.close();
  });

  it('counts by the connection: a client cannot pick a fresh address with X-Forwarded-For', async () => {
    const send = (key: string, i: number) =>
      client.send({
        method: 'GET',
        path: '/v1/tools',
        headers: { authorization: `Bearer ${key}`, 'x-forwarded-for': `203.0.113.${i}` },
      });
    for (let i = 0; i < LIMIT; i++) {
      expect((await send(`opk_wrong-${i}`, i)).status).toBe(401);
    }
    const before = counter.lookups;
    expectLimited(await send('opk_wrong-next', 99), 'spoofed address');
    expectLimited(await send(tenant.apiKey, 100), 'right key');
    expect(counter.lookups).toBe(before);
    // The operator pages count apart.
    const board = await client.send({
      method: 'GET',
      path: '/admin/queues/api/queues',
      headers: { authorization: harness.adminAuthorization },
    });
    expect(board.status).toBe(200);
  });
});

describe('the sign-in failure limiter without Redis', () => {
  it('lets sign-ins be checked as usual', async () => {
    const redis = new Redis({ host: '127.0.0.1', port: 1, lazyConnect: true, enableOfflineQueue: false });
    try {
      const limiter = authFailureLimiter(
        redisWindowCounter(redis, 'unreachable'),
        { max: 1, windowMs: 60_000 },
        createLogger('silent'),
      );
      const req = { ip: '192.0.2.9', socket: {} } as unknown as Request;
      const res = { set: () => res } as unknown as Response;
      for (let i = 0; i < 3; i++) {
        await limiter.recordFailure('api', req);
        await expect(limiter.refuseIfBlocked('api', req, res)).resolves.toBeUndefined();
      }
    } finally {
      redis.disconnect();
    }
  });
});
