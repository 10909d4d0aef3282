/**
 * Limits that keep one tenant from hurting the others: requests per API key (429 with
 * Retry-After, counted in Redis), active background operations per organization, and keys that
 * can be revoked.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { revokeApiKey } from '../../src/store/index.ts';
import { type Harness, ids, startHarness } from '../helpers/harness.ts';
import { inOneRateWindow } from '../helpers/rate-window.ts';

describe('limits (postgres)', () => {
  let harness: Harness;
  let limited: Harness;

  beforeAll(async () => {
    harness = await startHarness('postgres', { env: { OPSPAD_MAX_ACTIVE_BACKGROUND: '2' } });
    limited = await startHarness('postgres', { env: { OPSPAD_RATE_LIMIT: '5/1m' } });
  });
  afterAll(async () => {
    await harness.close();
    await limited.close();
  });

  it('answers 429 with Retry-After once a key passes its rate, without touching other keys', async () => {
    await inOneRateWindow(60_000, async () => {
      const tenant = await limited.newTenant();
      const other = await limited.newTenant();
      const conversation = randomUUID();
      const statuses: number[] = [];
      for (let i = 0; i < 5; i++) {
        statuses.push((await tenant.context(conversation)).status);
      }
      expect(statuses).toEqual([200, 200, 200, 200, 200]);
      const response = await fetch(`${limited.url}/v1/conversations/${conversation}/context`, {
        headers: { authorization: `Bearer ${tenant.apiKey}` },
      });
      expect(response.status).toBe(429);
      expect(Number(response.headers.get('retry-after'))).toBeGreaterThan(0);
      expect(await response.json()).toMatchObject({ error: { code: 'rate_limited', details: { limit: 5 } } });
      expect((await other.context(randomUUID())).status).toBe(200);
    });
  });

  it('caps active background operations per organization, and an assistant operation is not counted', async () => {
    const tenant = await harness.newTenant();
    const background = (conversation: string) =>
      tenant.op(conversation, {
        action: 'create',
        operation_type: 'demo',
        total_items: 3,
        item_ids: ids(3),
        query_params: { latency_ms: 60_000 },
      });
    const first = randomUUID();
    expect((await background(first)).status).toBe(200);
    expect((await background(randomUUID())).status).toBe(200);
    const third = randomUUID();
    const refused = await background(third);
    expect(refused.status).toBe(409);
    expect(refused.body).toMatchObject({
      error: { code: 'too_many_active_operations', details: { active: 2, limit: 2 } },
    });
    const written = await harness.db.query('SELECT 1 FROM assistant_operation WHERE conversation_id = $1', [third]);
    expect(written).toEqual([]);

    const assistant = await tenant.op(third, {
      action: 'create',
      operation_type: 'notes',
      total_items: 1,
      item_ids: ['a'],
    });
    expect(assistant.status).toBe(200);

    const firstId = (await tenant.op(first, { action: 'progress' })).body.operation_id as string;
    await tenant.op(first, { action: 'cancel', operation_id: firstId });
    expect((await background(randomUUID())).status).toBe(200);
  });

  it('refuses a revoked key from the next request on', async () => {
    const tenant = await harness.newTenant();
    const conversation = randomUUID();
    expect((await tenant.context(conversation)).status).toBe(200);
    const revoked = await revokeApiKey(harness.db, tenant.apiKey);
    expect(revoked?.organization_id).toBe(tenant.organizationId);
    const after = await tenant.context(conversation);
    expect(after.status).toBe(401);
    expect(after.body).toMatchObject({ error: { code: 'unauthorized' } });
  });
});
