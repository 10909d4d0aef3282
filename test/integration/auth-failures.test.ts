/**
 * Failed sign-ins are limited per client address and per presented credential (postgres,
 * OPSPAD_AUTH_FAILURE_LIMIT=3/1h): past the limit, wrong API keys and wrong operator passwords
 * are answered 429 with Retry-After, and a key refused that often is refused before its lookup.
 * A right key or password from that address still passes: one client sending wrong keys never
 * locks out the others behind its address. Requests without credentials do not count; the API
 * and the operator pages count apart; the address is the connection's unless OPSPAD_TRUST_PROXY
 * names the proxy; without Redis, sign-ins go on.
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

    it('answers wrong keys past the limit 429, and still lets a right key from there through', async () => {
      const address = '198.51.100.7';
      expect((await api(tenant.apiKey, address)).status).toBe(200);
      for (let i = 0; i < LIMIT; i++) {
        expect((await api(`opk_wrong-${randomUUID()}`, address)).status).toBe(401);
      }
      for (let i = 0; i < 5; i++) {
        expectLimited(await api(`opk_wrong-${randomUUID()}`, address), `wrong key ${i}`);
      }
      expect((await api(tenant.apiKey, address)).status, 'right key').toBe(200);
      // Another client behind the same proxy has a count of its own.
      expect((await api(tenant.apiKey, '198.51.100.70')).status).toBe(200);
    });

    it('refuses a key refused that often before looking it up, from any address', async () => {
      const revoked = `opk_revoked-${randomUUID()}`;
      for (let i = 0; i < LIMIT; i++) {
        expect((await api(revoked, `198.51.100.${20 + i}`)).status).toBe(401);
      }
      const before = counter.lookups;
      expectLimited(await api(revoked, '198.51.100.30'), 'the same wrong key');
      expect(counter.lookups, 'key lookups once that key is limited').toBe(before);
      expect((await api(tenant.apiKey, '198.51.100.30')).status).toBe(200);
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
      // Past the limit the address gets one check per window / limit: the next is refused unchecked.
      expectLimited(await board(harness.adminAuthorization, address), 'right password, in the same slot');
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
    expectLimited(await send('opk_wrong-next', 99), 'spoofed address');
    // The operator pages count apart.
    const board = await client.send({
      method: 'GET',
      path: '/admin/queues/api/queues',
      headers: { authorization: harness.adminAuthorization },
    });
    expect(board.status).toBe(200);
  });

  it('lets a valid key through after 50 bad tokens from the same address', async () => {
    const statuses = new Set<number>();
    for (let i = 0; i < 50; i++) {
      statuses.add(
        (
          await client.send({
            method: 'GET',
            path: '/v1/tools',
            headers: { authorization: `Bearer opk_bad-${randomUUID()}` },
          })
        ).status,
      );
    }
    // The connection's address is past its limit already (the test above): all but the first few are 429.
    expect([...statuses].filter((status) => status !== 401 && status !== 429)).toEqual([]);
    expect(statuses.has(429)).toBe(true);
    const valid = await client.send({
      method: 'GET',
      path: '/v1/tools',
      headers: { authorization: `Bearer ${tenant.apiKey}` },
    });
    expect(valid.status).toBe(200);
    expect(counter.lookups).toBeGreaterThan(0);
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
        const gate = await limiter.beforeCheck('api', req, res, 'opk_wrong');
        expect(gate).toEqual({ addressBlocked: false });
        await expect(limiter.afterFailure('api', req, res, 'opk_wrong', gate)).resolves.toBeUndefined();
      }
    } finally {
      redis.disconnect();
    }
  });
});
