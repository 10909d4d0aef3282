/**
 * Bad input over HTTP, on real Postgres and on PGlite: every malformed call is answered 400 with
 * `{error: {code, message, details}}` whose message names what was wrong, and writes nothing —
 * the organization's conversations, operations, items and events are exactly as before.
 * Missing or wrong API keys get 401.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ENGINES,
  type Engine,
  type Harness,
  type HttpResult,
  ids,
  startHarness,
  type Tenant,
} from '../helpers/harness.ts';
import { ITEM_STATES } from '../helpers/item-states.ts';

interface ErrorResponse {
  error: { code: string; message: string; details: Record<string, unknown> };
}

/** Everything an organization has in the database; two equal snapshots mean nothing was written. */
async function snapshot(harness: Harness, organizationId: string) {
  const [counts] = await harness.db.query(
    `SELECT
       (SELECT count(*)::int FROM assistant_conversation WHERE organization_id = $1) AS conversations,
       (SELECT count(*)::int FROM assistant_operation WHERE organization_id = $1) AS operations,
       (SELECT count(*)::int FROM assistant_operation_item i
          JOIN assistant_operation o ON o.id = i.operation_id WHERE o.organization_id = $1) AS items,
       (SELECT count(*)::int FROM operation_event WHERE organization_id = $1) AS events`,
    [organizationId],
  );
  const operations = await harness.db.query(
    `SELECT id, status, total_items, completed_count, failed_count, state_json, updated_at
     FROM assistant_operation WHERE organization_id = $1 ORDER BY id`,
    [organizationId],
  );
  const items = await harness.db.query(
    `SELECT i.operation_id, i.ordinal, i.item_id, i.status, i.attempts, i.lease_owner, i.lease_expires_at, i.reason,
            i.updated_at
     FROM (${ITEM_STATES}) i JOIN assistant_operation o ON o.id = i.operation_id
     WHERE o.organization_id = $1 ORDER BY i.operation_id, i.ordinal`,
    [organizationId],
  );
  return { counts, operations, items };
}

function expectError(
  response: HttpResult,
  expected: { status?: number; code: string; mentions: readonly string[] },
): ErrorResponse['error'] {
  expect(response.status, JSON.stringify(response.body)).toBe(expected.status ?? 400);
  const body = response.body as unknown as ErrorResponse;
  expect(Object.keys(body)).toEqual(['error']);
  expect(Object.keys(body.error).sort()).toEqual(['code', 'details', 'message']);
  expect(body.error.code).toBe(expected.code);
  expect(typeof body.error.details).toBe('object');
  for (const text of expected.mentions) {
    expect(body.error.message).toContain(text);
  }
  return body.error;
}

const validCreate = {
  action: 'create',
  operation_type: 'send_sms',
  total_items: 3,
  item_ids: ['contact-1', 'contact-2', 'contact-3'],
};

describe.each(ENGINES)('bad input on %s', (engine: Engine) => {
  let harness: Harness;
  let tenant: Tenant;
  /** A conversation with one active operation over contact-1..contact-6. */
  let conversation: string;
  let operationId: string;

  beforeAll(async () => {
    harness = await startHarness(engine);
    tenant = await harness.newTenant();
    conversation = randomUUID();
    const created = await tenant.op(conversation, {
      action: 'create',
      operation_type: 'send_sms',
      total_items: 6,
      item_ids: ids(6),
      batch_size: 2,
    });
    expect(created.status).toBe(200);
    operationId = created.body.operation_id as string;
    // One batch leased and recorded, so the snapshot has more than pending rows to compare.
    await tenant.op(conversation, { action: 'progress' });
    await tenant.op(conversation, { action: 'update', operation_id: operationId, completed_ids: ['contact-1'] });
  });
  afterAll(async () => {
    await harness.close();
  });

  /** Sends `call`, then checks the error and that the tenant's data did not change. */
  async function rejects(
    call: () => Promise<HttpResult>,
    expected: { status?: number; code: string; mentions: readonly string[] },
  ) {
    const before = await snapshot(harness, tenant.organizationId);
    const error = expectError(await call(), expected);
    expect(await snapshot(harness, tenant.organizationId)).toEqual(before);
    return error;
  }

  function post(path: string, body: string, headers: Record<string, string>) {
    return harness.request(path, { method: 'POST', headers, body });
  }

  const toolPath = (conversationId: string, tool = 'manage_assistant_operation') =>
    `/v1/conversations/${conversationId}/tools/${tool}`;

  describe('create', () => {
    const cases: { name: string; input: Record<string, unknown>; code?: string; mentions: string[] }[] = [
      {
        name: 'total_items differs from item_ids.length',
        input: { ...validCreate, total_items: 4 },
        mentions: ['total_items', 'is 4 but item_ids holds 3 ids'],
      },
      {
        name: 'an empty id',
        input: { ...validCreate, item_ids: ['contact-1', '', 'contact-3'] },
        mentions: ['item_ids[1]', 'must not be empty'],
      },
      {
        name: 'an id over 512 characters',
        input: { ...validCreate, item_ids: ['contact-1', 'contact-2', 'x'.repeat(513)] },
        mentions: ['item_ids[2]', 'at most 512 characters'],
      },
      {
        name: 'a non-string id',
        input: { ...validCreate, item_ids: ['contact-1', 42, 'contact-3'] },
        mentions: ['item_ids[1]', 'must be a string'],
      },
      {
        name: 'an unknown extra field',
        input: { ...validCreate, priority: 'high' },
        mentions: ['unknown field "priority"'],
      },
      {
        name: 'batch_size as a string',
        input: { ...validCreate, batch_size: '5' },
        mentions: ['batch_size', 'expected number'],
      },
      {
        name: 'batch_size 0',
        input: { ...validCreate, batch_size: 0 },
        mentions: ['batch_size'],
      },
      {
        name: 'a NUL character in an id',
        input: { ...validCreate, item_ids: ['contact-1', 'contact\u00002', 'contact-3'] },
        mentions: ['item_ids[1]', 'NUL'],
      },
      {
        name: 'a NUL character in a query_params key',
        input: { ...validCreate, query_params: { filter: { 'ta\u0000g': 'Lead' } } },
        mentions: ['query_params.filter', 'NUL'],
      },
    ];

    it.each(cases)('refuses $name', async ({ input, code, mentions }) => {
      await rejects(() => tenant.op(randomUUID(), input), { code: code ?? 'validation_failed', mentions });
    });

    it('refuses duplicate ids and names each of them', async () => {
      const error = await rejects(
        () =>
          tenant.op(randomUUID(), {
            ...validCreate,
            total_items: 6,
            item_ids: ['contact-1', 'contact-2', 'contact-1', 'contact-3', 'contact-2', 'contact-1'],
          }),
        { code: 'duplicate_item_ids', mentions: ['item_ids', '"contact-1"', '"contact-2"'] },
      );
      expect(error.message).not.toContain('"contact-3"');
      expect(error.details).toMatchObject({ field: 'item_ids', duplicate_ids: ['contact-1', 'contact-2'] });
    });

    it('accepts a backslash followed by "u0000" (an escape, not a NUL character)', async () => {
      const id = 'C:\\u0000dir';
      const created = await tenant.op(randomUUID(), { ...validCreate, total_items: 1, item_ids: [id] });
      expect(created.status).toBe(200);
      const rows = await harness.db.query<{ item_id: string }>(
        'SELECT item_id FROM assistant_operation_item WHERE operation_id = $1',
        [created.body.operation_id],
      );
      expect(rows).toEqual([{ item_id: id }]);
    });
  });

  describe('update', () => {
    it('refuses unknown ids, names them, and does not record the known ids of the same call', async () => {
      const error = await rejects(
        () =>
          tenant.op(conversation, {
            action: 'update',
            operation_id: operationId,
            completed_ids: ['contact-2', 'ghost-1', 'contact-3'],
            failed: [{ id: 'ghost-2', reason: 'no phone' }],
          }),
        { code: 'unknown_item_ids', mentions: ['"ghost-1"', '"ghost-2"', 'nothing was recorded'] },
      );
      expect(error.message).not.toContain('"contact-2"');
      expect(error.details).toMatchObject({ unknown_ids: ['ghost-1', 'ghost-2'], unknown_count: 2 });
      const items = await harness.db.query<{ item_id: string; status: string }>(
        `SELECT item_id, status FROM assistant_operation_item WHERE operation_id = $1 AND item_id = ANY($2::text[])`,
        [operationId, ['contact-2', 'contact-3']],
      );
      expect(items.map((i) => i.status)).not.toContain('completed');
    });

    it('refuses an id that is both completed and failed', async () => {
      await rejects(
        () =>
          tenant.op(conversation, {
            action: 'update',
            operation_id: operationId,
            completed_ids: ['contact-3', 'contact-4'],
            failed: [{ id: 'contact-4', reason: 'bounced' }],
          }),
        { code: 'validation_failed', mentions: ['completed_ids', 'failed', '"contact-4"'] },
      );
    });

    it('refuses a non-UUID operation_id', async () => {
      await rejects(
        () => tenant.op(conversation, { action: 'update', operation_id: '42', completed_ids: ['contact-3'] }),
        { code: 'validation_failed', mentions: ['operation_id', 'UUID'] },
      );
    });
  });

  describe('any call', () => {
    it('refuses an unknown action and lists the valid ones', async () => {
      const error = await rejects(() => tenant.op(conversation, { action: 'delete_everything' }), {
        code: 'validation_failed',
        mentions: ['action', 'create, progress, update, complete, resume, pause, cancel, get, retry_failed'],
      });
      expect(error.details).toMatchObject({ issues: [{ field: 'action' }] });
    });

    it('refuses a call without an action', async () => {
      await rejects(() => tenant.op(conversation, { operation_id: operationId }), {
        code: 'validation_failed',
        mentions: ['action'],
      });
    });

    it('refuses a conversation id that is not a UUID', async () => {
      await rejects(() => tenant.op('conversation-1', validCreate), {
        code: 'validation_failed',
        mentions: ['conversationId', 'UUID'],
      });
      const context = await tenant.context('conversation-1');
      expectError(context as HttpResult, { code: 'validation_failed', mentions: ['conversationId'] });
    });

    it('refuses a body that is not valid JSON', async () => {
      const error = await rejects(
        () =>
          post(toolPath(conversation), '{"action": "progress",', {
            authorization: `Bearer ${tenant.apiKey}`,
            'content-type': 'application/json',
          }),
        { code: 'invalid_json', mentions: ['body', 'JSON'] },
      );
      expect(error.details).toEqual({ field: '(body)' });
    });

    it('refuses a body sent without a JSON content type', async () => {
      const error = await rejects(
        () =>
          post(toolPath(randomUUID()), JSON.stringify(validCreate), {
            authorization: `Bearer ${tenant.apiKey}`,
            'content-type': 'text/plain',
          }),
        { code: 'validation_failed', mentions: ['body', 'Content-Type: application/json'] },
      );
      expect(error.details).toEqual({ field: '(body)' });
    });

    it('refuses an unknown tool and names it', async () => {
      const error = await rejects(() => tenant.tool(randomUUID(), validCreate, 'delete_all_contacts'), {
        code: 'unknown_tool',
        mentions: ['"delete_all_contacts"', 'manage_assistant_operation'],
      });
      expect(error.details).toMatchObject({
        field: 'toolName',
        tools: expect.arrayContaining(['manage_assistant_operation', 'write_to_scratchpad', 'read_from_scratchpad']),
      });
    });
  });

  describe('authentication', () => {
    it('answers 401 without an Authorization header', async () => {
      const response = await harness.request(toolPath(conversation), {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ action: 'pause' }),
      });
      expectError(response, { status: 401, code: 'unauthorized', mentions: ['Authorization: Bearer'] });
      expect((await tenant.op(conversation, { action: 'get' })).body.status).toBe('active');
    });

    it.each([
      ['a wrong key', 'opk_this-is-not-a-real-key'],
      ['a malformed key', 'hunter2'],
    ])('answers 401 with %s', async (_name, key) => {
      const before = await snapshot(harness, tenant.organizationId);
      const response = await harness.request(toolPath(conversation), {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ action: 'cancel', operation_id: operationId }),
      });
      expectError(response, { status: 401, code: 'unauthorized', mentions: ['API key is not valid'] });
      expect(await snapshot(harness, tenant.organizationId)).toEqual(before);
      const context = await harness.request(`/v1/conversations/${conversation}/context`, {
        headers: { authorization: `Bearer ${key}` },
      });
      expectError(context, { status: 401, code: 'unauthorized', mentions: [] });
    });
  });

  describe('limits', () => {
    it('refuses a body over OPSPAD_MAX_BODY_BYTES with body_too_large', async () => {
      const small = await startHarness(engine, { env: { OPSPAD_MAX_BODY_BYTES: '2048' } });
      try {
        const smallTenant = await small.newTenant();
        const fits = await smallTenant.op(randomUUID(), validCreate);
        expect(fits.status).toBe(200);

        const before = await snapshot(small, smallTenant.organizationId);
        const contacts = ids(200);
        expect(JSON.stringify({ ...validCreate, total_items: 200, item_ids: contacts }).length).toBeGreaterThan(2048);
        const response = await smallTenant.op(randomUUID(), { ...validCreate, total_items: 200, item_ids: contacts });
        const error = expectError(response, {
          status: 413,
          code: 'body_too_large',
          mentions: ['2048 bytes', 'OPSPAD_MAX_BODY_BYTES'],
        });
        expect(error.details).toMatchObject({ field: '(body)', limit_bytes: 2048 });
        expect(await snapshot(small, smallTenant.organizationId)).toEqual(before);
      } finally {
        await small.close();
      }
    });

    it('refuses a create over OPSPAD_MAX_ITEMS with too_many_items', async () => {
      const limited = await startHarness(engine, { env: { OPSPAD_MAX_ITEMS: '10' } });
      try {
        const limitedTenant = await limited.newTenant();
        const atLimit = await limitedTenant.op(randomUUID(), { ...validCreate, total_items: 10, item_ids: ids(10) });
        expect(atLimit.status).toBe(200);

        const before = await snapshot(limited, limitedTenant.organizationId);
        const response = await limitedTenant.op(randomUUID(), { ...validCreate, total_items: 11, item_ids: ids(11) });
        const error = expectError(response, {
          code: 'too_many_items',
          mentions: ['item_ids', '11 ids', 'at most 10', 'OPSPAD_MAX_ITEMS'],
        });
        expect(error.details).toMatchObject({ field: 'item_ids', count: 11, max_items: 10 });
        expect(await snapshot(limited, limitedTenant.organizationId)).toEqual(before);
      } finally {
        await limited.close();
      }
    });
  });

  it('left the seeded operation exactly as the setup made it', async () => {
    const get = await tenant.op(conversation, { action: 'get', operation_id: operationId });
    expect(get.body).toMatchObject({
      status: 'active',
      total_items: 6,
      completed_count: 1,
      failed_count: 0,
      in_flight_count: 1,
      remaining_count: 5,
    });
  });
});
