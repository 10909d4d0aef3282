/**
 * Size limits: what one call may make opspad store. Each limit has a variable and a default, and
 * a call over it is refused — 400 naming the field, the limit and the variable, or 413 for a body
 * — with nothing written. Compression changes nothing: limits count what is decompressed and
 * stored, so a 64 KB gzip body can no longer become 63 MB of query_params, nor a 100 KB one a
 * 30 MB scratchpad re-stored on every update.
 */
import { randomUUID } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { organizationDigest } from '../helpers/digest.ts';
import { type Harness, startHarness, type Tenant } from '../helpers/harness.ts';
import { rawClient } from '../helpers/raw-http.ts';

interface ErrorBody {
  error: { code: string; message: string; details: Record<string, unknown> };
}

function expectRefused(
  response: { status: number; body?: unknown; json?: unknown; text?: string },
  expected: { status?: number; code?: string; field: string; mentions: readonly string[] },
) {
  const body = (response.json ?? response.body) as ErrorBody;
  expect(response.status, JSON.stringify(body)).toBe(expected.status ?? 400);
  expect(body.error.code).toBe(expected.code ?? 'validation_failed');
  expect(body.error.message).toContain(expected.field);
  for (const text of expected.mentions) {
    expect(body.error.message).toContain(text);
  }
  return body.error;
}

const create = (extra: Record<string, unknown>, itemIds = ['a', 'b']) => ({
  action: 'create',
  operation_type: 'limits',
  total_items: itemIds.length,
  item_ids: itemIds,
  ...extra,
});

describe('size limits (postgres)', () => {
  let defaults: Harness;
  let tight: Harness;
  let roomy: Harness;

  beforeAll(async () => {
    defaults = await startHarness('postgres');
    tight = await startHarness('postgres', {
      env: { OPSPAD_MAX_BODY_BYTES: '65536', OPSPAD_MAX_NOTE_BYTES: '100', OPSPAD_MAX_ITEM_ID_LENGTH: '16' },
    });
    roomy = await startHarness('postgres', { env: { OPSPAD_MAX_SCRATCHPAD_BYTES: String(1024 * 1024) } });
  });
  afterAll(async () => {
    await Promise.all([defaults?.close(), tight?.close(), roomy?.close()]);
  });

  /** Runs `call` as a new tenant of `harness` and checks it wrote nothing. */
  async function unchanged<T>(harness: Harness, call: (tenant: Tenant) => Promise<T>): Promise<T> {
    const tenant = await harness.newTenant();
    const before = await organizationDigest(harness.db, tenant.organizationId);
    const result = await call(tenant);
    expect(await organizationDigest(harness.db, tenant.organizationId)).toEqual(before);
    return result;
  }

  async function sendGzip(harness: Harness, tenant: Tenant, method: string, path: string, json: string) {
    const client = rawClient(harness.url);
    try {
      return await client.send({
        method,
        path,
        headers: {
          authorization: `Bearer ${tenant.apiKey}`,
          'content-type': 'application/json',
          'content-encoding': 'gzip',
        },
        body: gzipSync(json),
      });
    } finally {
      client.close();
    }
  }

  describe('query_params (OPSPAD_MAX_QUERY_PARAMS_BYTES, default 16 KiB)', () => {
    it('accepts query_params of 16 KiB as stored JSON, and refuses one byte more', async () => {
      const tenant = await defaults.newTenant();
      const fill = (bytes: number) => ({ filter: 'x'.repeat(bytes - '{"filter":""}'.length) });
      expect(Buffer.byteLength(JSON.stringify(fill(16_384)))).toBe(16_384);
      const fits = await tenant.op(randomUUID(), create({ query_params: fill(16_384) }));
      expect(fits.status, JSON.stringify(fits.body)).toBe(200);
      const error = await unchanged(defaults, async (t) =>
        expectRefused(await t.op(randomUUID(), create({ query_params: fill(16_385) })), {
          field: 'query_params',
          mentions: ['more than 16,384 bytes', 'OPSPAD_MAX_QUERY_PARAMS_BYTES'],
        }),
      );
      expect(error.details).toMatchObject({
        issues: [{ field: 'query_params' }],
        limit: { variable: 'OPSPAD_MAX_QUERY_PARAMS_BYTES', max: 16_384, unit: 'bytes' },
      });
    });

    it('counts multi-byte characters as the bytes stored: 6,000 "é" are 12,000 bytes', async () => {
      await unchanged(defaults, async (t) =>
        expectRefused(
          await t.op(randomUUID(), create({ query_params: { a: 'é'.repeat(6000), b: 'é'.repeat(2200) } })),
          {
            field: 'query_params',
            mentions: ['OPSPAD_MAX_QUERY_PARAMS_BYTES'],
          },
        ),
      );
    });

    it('refuses a 64 KB gzip body that inflates to 63 MB of query_params (was stored whole)', async () => {
      const json = JSON.stringify(create({ query_params: { blob: 'a'.repeat(63 * 1024 * 1024) } }));
      const response = await unchanged(defaults, (t) =>
        sendGzip(defaults, t, 'POST', `/v1/conversations/${randomUUID()}/tools/manage_assistant_operation`, json),
      );
      expect(gzipSync(json).length).toBeLessThan(100 * 1024);
      expectRefused(response, { field: 'query_params', mentions: ['OPSPAD_MAX_QUERY_PARAMS_BYTES'] });
    });
  });

  describe('bodies (OPSPAD_MAX_BODY_BYTES, counted after decompression)', () => {
    it('refuses a gzip body of a few KB that inflates past the limit with 413', async () => {
      const json = JSON.stringify(create({ notes: ' '.repeat(200_000) }));
      const response = await unchanged(tight, (t) =>
        sendGzip(tight, t, 'POST', `/v1/conversations/${randomUUID()}/tools/manage_assistant_operation`, json),
      );
      expect(gzipSync(json).length).toBeLessThan(65_536 / 10);
      const error = expectRefused(response, {
        status: 413,
        code: 'body_too_large',
        field: 'request body',
        mentions: ['65536 bytes', 'OPSPAD_MAX_BODY_BYTES', 'after decompression'],
      });
      expect(error.details).toMatchObject({ limit_bytes: 65_536, variable: 'OPSPAD_MAX_BODY_BYTES' });
    });

    it('reads at most a pad (1 MiB by default) on routes other than the operation tool', async () => {
      const items = Array.from({ length: 40_000 }, (_, i) => ({ text: `open item number ${i}` }));
      const json = JSON.stringify({ expected_version: 0, scratchpad: { open_items: items } });
      expect(json.length).toBeGreaterThan(1024 * 1024);
      const response = await unchanged(defaults, (t) =>
        sendGzip(defaults, t, 'PUT', `/v1/conversations/${randomUUID()}/scratchpad`, json),
      );
      expectRefused(response, {
        status: 413,
        code: 'body_too_large',
        field: 'request body',
        mentions: ['1048576 bytes', 'OPSPAD_MAX_SCRATCHPAD_BYTES', 'manage_assistant_operation'],
      });
    });
  });

  describe('notes (OPSPAD_MAX_NOTE_BYTES)', () => {
    const over = 'é'.repeat(51); // 102 bytes in UTF-8, 51 characters
    it.each([
      ['write_to_scratchpad', { notes: over }, 'notes'],
      ['read_from_scratchpad', { persistent_notes: over }, 'persistent_notes'],
      ['manage_assistant_operation', create({ notes: over }), 'notes'],
    ])('%s refuses a note over the limit, in bytes', async (tool, input, field) => {
      const error = await unchanged(tight, async (t) =>
        expectRefused(await t.tool(randomUUID(), input, tool), {
          field,
          mentions: ['102 bytes', 'the limit is 100 bytes', 'OPSPAD_MAX_NOTE_BYTES'],
        }),
      );
      expect(error.details).toMatchObject({ limit: { variable: 'OPSPAD_MAX_NOTE_BYTES', max: 100 } });
    });

    it('accepts a note of exactly the limit', async () => {
      const tenant = await tight.newTenant();
      const written = await tenant.tool(randomUUID(), { notes: 'é'.repeat(50) }, 'write_to_scratchpad');
      expect(written.status, JSON.stringify(written.body)).toBe(200);
    });
  });

  describe('item ids (OPSPAD_MAX_ITEM_ID_LENGTH)', () => {
    it('refuses an id over the configured length, naming it', async () => {
      const error = await unchanged(tight, async (t) =>
        expectRefused(await t.op(randomUUID(), create({}, ['short', 'x'.repeat(17)])), {
          field: 'item_ids[1]',
          mentions: ['17 characters', 'the limit is 16 characters', 'OPSPAD_MAX_ITEM_ID_LENGTH'],
        }),
      );
      expect(error.details).toMatchObject({ limit: { variable: 'OPSPAD_MAX_ITEM_ID_LENGTH', max: 16 } });
      const tenant = await tight.newTenant();
      expect((await tenant.op(randomUUID(), create({}, ['x'.repeat(16)]))).status).toBe(200);
    });
  });

  describe('scratchpads (OPSPAD_MAX_SCRATCHPAD_BYTES, default 256 KiB)', () => {
    const openItems = (count: number, prefix = 'open item') =>
      Array.from({ length: count }, (_, i) => ({ text: `${prefix} ${i} ${'x'.repeat(80)}` }));

    it('refuses a PUT of a pad over the limit, even gzip-compressed (a 100 KB gzip PUT stored 30 MB)', async () => {
      const json = JSON.stringify({ expected_version: 0, scratchpad: { open_items: openItems(3000) } });
      expect(json.length).toBeGreaterThan(262_144);
      const response = await unchanged(defaults, (t) =>
        sendGzip(defaults, t, 'PUT', `/v1/conversations/${randomUUID()}/scratchpad`, json),
      );
      const error = expectRefused(response, {
        field: 'scratchpad',
        mentions: ['the limit is 262,144 bytes', 'OPSPAD_MAX_SCRATCHPAD_BYTES', 'reorganize'],
      });
      expect(error.details).toMatchObject({ limit: { variable: 'OPSPAD_MAX_SCRATCHPAD_BYTES', max: 262_144 } });
    });

    it('refuses an update that would grow the pad past the limit, and keeps the pad as it was', async () => {
      const tenant = await defaults.newTenant();
      const conversation = randomUUID();
      const first = await tenant.tool(conversation, { add: { open_items: openItems(2000) } }, 'update_scratchpad');
      expect(first.status, JSON.stringify(first.body)).toBe(200);
      const before = await organizationDigest(defaults.db, tenant.organizationId);
      const grown = await tenant.tool(
        conversation,
        { add: { open_items: openItems(1000, 'more') } },
        'update_scratchpad',
      );
      expectRefused(grown, { field: 'scratchpad', mentions: ['OPSPAD_MAX_SCRATCHPAD_BYTES'] });
      expect(await organizationDigest(defaults.db, tenant.organizationId)).toEqual(before);
      // What one call adds is refused before each entry is validated when it alone is too large.
      const alone = await tenant.tool(
        conversation,
        { add: { open_items: openItems(3000, 'alone') } },
        'update_scratchpad',
      );
      expectRefused(alone, { field: 'add', mentions: ['OPSPAD_MAX_SCRATCHPAD_BYTES'] });
      expect(await organizationDigest(defaults.db, tenant.organizationId)).toEqual(before);
    });

    it('refuses an update past 20,000 entries in a section with a 400 naming it (was a 500)', async () => {
      const tenant = await roomy.newTenant();
      const conversation = randomUUID();
      const goals = Array.from({ length: 20_000 }, (_, i) => ({ text: `g${i}` }));
      const put = await tenant.tool(conversation, { replace: { goals } }, 'update_scratchpad');
      expect(put.status, JSON.stringify(put.body)).toBe(200);
      const before = await organizationDigest(roomy.db, tenant.organizationId);
      const more = await tenant.tool(conversation, { add: { goals: [{ text: 'one more' }] } }, 'update_scratchpad');
      expectRefused(more, { field: 'goals', mentions: ['20001 entries', 'at most 20000'] });
      expect(await organizationDigest(roomy.db, tenant.organizationId)).toEqual(before);
    });
  });
});
