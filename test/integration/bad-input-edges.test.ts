/**
 * Bad input at the edges of the wire, each once a 500: numbers past what a column holds (a
 * failures cursor, a trace or version page bound), compressed bodies that do not decompress,
 * and bytes that are not UTF-8. Every one is a 400 whose message names the field, and changes
 * nothing (a digest of the organization's rows before and after).
 */
import { randomUUID } from 'node:crypto';
import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { organizationDigest } from '../helpers/digest.ts';
import { type Harness, ids, startHarness, type Tenant } from '../helpers/harness.ts';
import { type RawClient, type RawResponse, rawClient } from '../helpers/raw-http.ts';

interface ErrorBody {
  error: { code: string; message: string; details: Record<string, unknown> };
}

function expectRefused(response: RawResponse, code: string, mentions: readonly string[]): ErrorBody['error'] {
  expect(response.status, response.text).toBe(400);
  const { error } = response.json as ErrorBody;
  expect(Object.keys(error).sort()).toEqual(['code', 'details', 'message']);
  expect(error.code).toBe(code);
  for (const text of mentions) {
    expect(error.message).toContain(text);
  }
  return error;
}

describe('bad input at the edges (postgres)', () => {
  let harness: Harness;
  let client: RawClient;
  let tenant: Tenant;
  let conversation: string;
  let operationId: string;
  let executionId: string;

  beforeAll(async () => {
    harness = await startHarness('postgres');
    client = rawClient(harness.url);
    tenant = await harness.newTenant();
    conversation = randomUUID();
    const created = await tenant.op(conversation, {
      action: 'create',
      operation_type: 'edges',
      total_items: 4,
      item_ids: ids(4),
      batch_size: 2,
    });
    expect(created.status).toBe(200);
    operationId = created.body.operation_id as string;
    await tenant.op(conversation, { action: 'progress' });
    await tenant.op(conversation, {
      action: 'update',
      operation_id: operationId,
      failed: [{ id: 'contact-1', reason: 'no phone' }],
    });
    executionId = (await tenant.post(`/v1/conversations/${conversation}/executions`)).body.execution_id as string;
    await tenant.tool(conversation, { notes: 'a note' }, 'write_to_scratchpad', { 'x-opspad-execution': executionId });
    const pad = await tenant.tool(
      conversation,
      { task: 'edges', add: { open_items: [{ text: 'x' }] } },
      'update_scratchpad',
    );
    expect(pad.status).toBe(200);
  });
  afterAll(async () => {
    client.close();
    await harness.close();
  });

  /** Sends the request, then checks that the organization's rows did not change. */
  async function send(method: string, path: string, body?: Buffer | string, headers: Record<string, string> = {}) {
    const before = await organizationDigest(harness.db, tenant.organizationId);
    const response = await client.send({
      method,
      path,
      headers: { authorization: `Bearer ${tenant.apiKey}`, ...headers },
      body,
    });
    expect(await organizationDigest(harness.db, tenant.organizationId)).toEqual(before);
    return response;
  }
  const toolPath = (tool = 'manage_assistant_operation') => `/v1/conversations/${conversation}/tools/${tool}`;
  const json = { 'content-type': 'application/json' };

  describe('numbers past what the database holds', () => {
    it('refuses a failures_cursor past the largest ordinal, naming it', async () => {
      const response = await send(
        'POST',
        toolPath(),
        JSON.stringify({ action: 'get', operation_id: operationId, failures_cursor: '9999999999' }),
        json,
      );
      const error = expectRefused(response, 'validation_failed', ['failures_cursor']);
      expect(error.details).toMatchObject({ issues: [{ field: 'failures_cursor' }] });
      // The largest cursor a page can return still works.
      const last = await send(
        'POST',
        toolPath(),
        JSON.stringify({ action: 'get', operation_id: operationId, failures_cursor: '2147483647' }),
        json,
      );
      expect(last.status, last.text).toBe(200);
      expect(last.json).toMatchObject({ failures: [], next_failures_cursor: null });
    });

    it.each([
      ['traces after', () => `/v1/executions/${executionId}/traces?after=99999999999`, 'after'],
      ['versions before', () => `/v1/conversations/${conversation}/scratchpad/versions?before=99999999999`, 'before'],
      ['events after', () => `/v1/conversations/${conversation}/scratchpad/events?after=99999999999999999999`, 'after'],
    ])('refuses %s past the largest value, naming it', async (_name, path, field) => {
      const error = expectRefused(await send('GET', path()), 'validation_failed', [field]);
      expect(error.details).toMatchObject({ issues: [{ field }] });
    });
  });

  describe('compressed bodies', () => {
    const progress = JSON.stringify({ action: 'progress' });
    const corrupt: [string, Buffer][] = [
      ['gzip', Buffer.concat([gzipSync(progress).subarray(0, 12), Buffer.from('not gzip at all')])],
      ['gzip', gzipSync(progress).subarray(0, 15)],
      ['deflate', Buffer.from('this is not a deflate stream')],
      ['br', Buffer.from([0xff, 0xff, 0xff, 0xff, 0x00, 0x13, 0x37])],
    ];

    it.each(corrupt)('refuses a corrupt %s body, naming the Content-Encoding', async (encoding, bytes) => {
      const error = expectRefused(
        await send('POST', toolPath(), bytes, { ...json, 'content-encoding': encoding }),
        'invalid_body_encoding',
        ['(body)', encoding],
      );
      expect(error.details).toMatchObject({ field: '(body)', content_encoding: encoding });
    });

    it.each([
      ['gzip', gzipSync],
      ['deflate', deflateSync],
      ['br', brotliCompressSync],
    ] as const)('accepts a whole %s body', async (encoding, compress) => {
      const response = await client.send({
        method: 'POST',
        path: toolPath(),
        headers: { authorization: `Bearer ${tenant.apiKey}`, ...json, 'content-encoding': encoding },
        body: compress(Buffer.from(JSON.stringify({ action: 'get', operation_id: operationId }))),
      });
      expect(response.status, response.text).toBe(200);
    });
  });

  describe('bytes that are not UTF-8', () => {
    const latin1 = (text: string) => Buffer.from(text, 'latin1');

    it.each([
      ['a latin-1 byte in a note', () => latin1('{"notes":"caf\xe9"}'), 'write_to_scratchpad'],
      [
        'a truncated sequence',
        () => Buffer.concat([Buffer.from('{"notes":"x'), Buffer.from([0xe2, 0x82]), Buffer.from('"}')]),
        'write_to_scratchpad',
      ],
      [
        'an encoded surrogate (CESU-8)',
        () => Buffer.concat([Buffer.from('{"notes":"'), Buffer.from([0xed, 0xa0, 0x80]), Buffer.from('"}')]),
        'write_to_scratchpad',
      ],
      [
        'an overlong encoding',
        () => Buffer.concat([Buffer.from('{"notes":"'), Buffer.from([0xc0, 0xaf]), Buffer.from('"}')]),
        'write_to_scratchpad',
      ],
    ])('refuses %s with invalid_utf8', async (_name, body, tool) => {
      const error = expectRefused(await send('POST', toolPath(tool), body(), json), 'invalid_utf8', ['UTF-8']);
      expect(error.details).toMatchObject({ field: '(body)' });
    });

    it('refuses two ids that differ only in bytes that are not UTF-8 (they were stored as one U+FFFD, "duplicates")', async () => {
      const body = Buffer.concat([
        Buffer.from('{"action":"create","operation_type":"t","total_items":2,"item_ids":["id-'),
        Buffer.from([0xff]),
        Buffer.from('","id-'),
        Buffer.from([0xfe]),
        Buffer.from('"]}'),
      ]);
      const other = randomUUID();
      const response = await client.send({
        method: 'POST',
        path: `/v1/conversations/${other}/tools/manage_assistant_operation`,
        headers: { authorization: `Bearer ${tenant.apiKey}`, ...json },
        body,
      });
      expectRefused(response, 'invalid_utf8', ['UTF-8']);
    });

    it('refuses invalid UTF-8 inside a gzip body too', async () => {
      const body = gzipSync(latin1('{"notes":"na\xefve"}'));
      expectRefused(
        await send('POST', toolPath('write_to_scratchpad'), body, { ...json, 'content-encoding': 'gzip' }),
        'invalid_utf8',
        ['UTF-8'],
      );
    });

    it('accepts valid multi-byte UTF-8 and stores it as sent', async () => {
      const written = await client.send({
        method: 'POST',
        path: toolPath('write_to_scratchpad'),
        headers: { authorization: `Bearer ${tenant.apiKey}`, ...json },
        body: Buffer.from('{"notes":"café ✓ 😀"}', 'utf8'),
      });
      expect(written.status, written.text).toBe(200);
      expect((written.json as { result: string }).result).toContain('café ✓ 😀');
    });
  });
});
