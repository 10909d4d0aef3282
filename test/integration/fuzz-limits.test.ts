/**
 * Property-based fuzzing (fast-check) of the edges the main fuzz suite (fuzz.test.ts) does not
 * reach, over loopback HTTP against a running opspad on real Postgres:
 * - numbers past what a column holds, in cursors, page bounds and tool fields;
 * - compressed bodies that are corrupt, cut short, mislabelled or stacked;
 * - bytes that are not UTF-8, anywhere in an otherwise valid body;
 * - values around each size limit (query_params, notes, pads, item ids), where the answer must
 *   agree with the limit to the byte.
 *
 * Every answer is a 2xx, or a 4xx `{error: {code, message, details}}` whose status matches its
 * code — never a 5xx — and a refused call leaves the organization's rows as they were (a digest
 * before and after). OPSPAD_FUZZ_SEED replays a run; OPSPAD_FUZZ_SCALE multiplies the case counts.
 */
import { randomUUID } from 'node:crypto';
import { brotliCompressSync, deflateRawSync, deflateSync, gzipSync } from 'node:zlib';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ERROR_CODES } from '../../src/domain/errors.ts';
import { organizationDigest } from '../helpers/digest.ts';
import { type Harness, ids, startHarness, type Tenant } from '../helpers/harness.ts';
import { type RawClient, type RawResponse, rawClient } from '../helpers/raw-http.ts';

const SCALE = Number(process.env.OPSPAD_FUZZ_SCALE ?? 1);
const SEED = process.env.OPSPAD_FUZZ_SEED === undefined ? undefined : Number(process.env.OPSPAD_FUZZ_SEED);
const runs = (count: number) => Math.max(1, Math.round(count * SCALE));

/** Small limits, so cases around them stay small. */
const LIMITS = {
  OPSPAD_MAX_QUERY_PARAMS_BYTES: 2048,
  OPSPAD_MAX_NOTE_BYTES: 512,
  OPSPAD_MAX_SCRATCHPAD_BYTES: 16_384,
  OPSPAD_MAX_ITEM_ID_LENGTH: 64,
  OPSPAD_MAX_BODY_BYTES: 262_144,
} as const;

interface Request {
  method: string;
  path: string;
  body?: Buffer;
  headers?: Record<string, string>;
}

interface ErrorJson {
  error: { code: keyof typeof ERROR_CODES; message: string; details: Record<string, unknown> };
}

describe('fuzzing the edges: numbers, compression, UTF-8, size limits (postgres)', () => {
  let harness: Harness;
  let client: RawClient;
  let tenant: Tenant;
  let conversation: string;
  let operationId: string;
  let executionId: string;
  const statuses = new Map<number, number>();

  beforeAll(async () => {
    // The file's own database (test/helpers/file-database.ts): no other file's sweep or
    // reconciler moves the digests compared below.
    harness = await startHarness('postgres', {
      env: {
        OPSPAD_RATE_LIMIT: '1000000/1s',
        ...Object.fromEntries(Object.entries(LIMITS).map(([k, v]) => [k, String(v)])),
      },
    });
    client = rawClient(harness.url);
    tenant = await harness.newTenant();
    conversation = randomUUID();
    const created = await tenant.op(conversation, {
      action: 'create',
      operation_type: 'fuzz_edges',
      total_items: 10,
      item_ids: ids(10, 'e'),
      batch_size: 3,
    });
    expect(created.status).toBe(200);
    operationId = created.body.operation_id as string;
    await tenant.op(conversation, { action: 'progress' });
    await tenant.op(conversation, {
      action: 'update',
      operation_id: operationId,
      failed: [{ id: 'e-1', reason: 'no phone' }],
    });
    executionId = (await tenant.post(`/v1/conversations/${conversation}/executions`)).body.execution_id as string;
    await tenant.tool(conversation, { task: 'edges', add: { open_items: [{ text: 'x' }] } }, 'update_scratchpad');
  });
  afterAll(async () => {
    client?.close();
    await harness?.close();
    const summary = Object.fromEntries([...statuses.entries()].sort(([a], [b]) => a - b));
    console.log(`fuzz-limits: statuses ${JSON.stringify(summary)}`);
  });

  /** Sends `request` as the tenant; checks the answer's shape and that a refusal wrote nothing. */
  async function exercise(request: Request): Promise<RawResponse> {
    // A reorganization sweep takes any pad changed since its last reorganization, whatever its
    // organization: leave it nothing to take from this tenant, so the digest below changes only
    // through the call under test.
    await harness.db.query('UPDATE scratchpad SET reorganized_version = version WHERE organization_id = $1', [
      tenant.organizationId,
    ]);
    const before = await organizationDigest(harness.db, tenant.organizationId);
    const response = await client.send({
      method: request.method,
      path: request.path,
      headers: { authorization: `Bearer ${tenant.apiKey}`, ...request.headers },
      body: request.body,
    });
    statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1);
    const call = `${request.method} ${request.path} ${JSON.stringify(request.headers ?? {})} (${request.body?.length ?? 0} bytes) → ${response.status} ${response.text.slice(0, 300)}`;
    const accepted = response.status >= 200 && response.status < 300;
    if (!accepted) {
      if (response.status < 400 || response.status >= 500) {
        throw new Error(`status ${response.status}: ${call}`);
      }
      const { error } = response.json as ErrorJson;
      expect(Object.keys(error).sort(), call).toEqual(['code', 'details', 'message']);
      expect(ERROR_CODES[error.code], call).toBe(response.status);
      expect(error.message.length, call).toBeGreaterThan(0);
      expect(await organizationDigest(harness.db, tenant.organizationId), call).toEqual(before);
    }
    return response;
  }

  const fuzz = <T>(arb: fc.Arbitrary<T>, numRuns: number, check: (value: T) => Promise<void>) =>
    fc.assert(fc.asyncProperty(arb, check), { numRuns: runs(numRuns), seed: SEED, endOnFailure: true });

  const json = (value: unknown) => Buffer.from(JSON.stringify(value));
  const toolPath = (tool = 'manage_assistant_operation', conv = conversation) =>
    `/v1/conversations/${conv}/tools/${tool}`;
  const JSON_TYPE = { 'content-type': 'application/json' };

  // ─── Numbers ──────────────────────────────────────────────────────────────────────────────

  const hugeDigits = fc.oneof(
    fc.constantFrom('2147483647', '2147483648', '4294967296', '9999999999', '99999999999', '9223372036854775808'),
    fc.integer({ min: 10, max: 40 }).map((n) => '9'.repeat(n)),
    fc.bigInt({ min: 2n ** 31n - 2n, max: 2n ** 70n }).map(String),
    fc.constantFrom('1e20', '1e308', '1e400', '-0', '0x7fffffff', '2147483647.5', '00000000002147483648'),
  );
  const hugeNumber = fc.oneof(
    fc.constantFrom(2 ** 31 - 1, 2 ** 31, 2 ** 32, 2 ** 53, 2 ** 53 + 2, 1e20, 1e308, Number.MAX_SAFE_INTEGER),
    fc.integer({ min: 2 ** 31 - 2, max: Number.MAX_SAFE_INTEGER }),
  );

  it('answers numbers past what a column holds with a 4xx naming the field, never a 5xx', async () => {
    const request = fc.oneof(
      hugeDigits.map((cursor) => ({
        method: 'POST',
        path: toolPath(),
        body: json({ action: 'get', operation_id: operationId, failures_cursor: cursor }),
        headers: JSON_TYPE,
        field: 'failures_cursor',
      })),
      fc.tuple(fc.constantFrom('failures_limit', 'lease_seconds', 'batch_size'), hugeNumber).map(([field, value]) => ({
        method: 'POST',
        path: toolPath(),
        body: json(
          field === 'failures_limit'
            ? { action: 'get', failures_limit: value }
            : field === 'lease_seconds'
              ? { action: 'progress', lease_seconds: value }
              : { action: 'retry_failed', operation_id: operationId, batch_size: value },
        ),
        headers: JSON_TYPE,
        field,
      })),
      fc
        .tuple(
          fc.constantFrom(
            ['GET', `/v1/executions/{execution}/traces`, 'after'],
            ['GET', `/v1/executions/{execution}/traces`, 'limit'],
            ['GET', `/v1/conversations/{conversation}/scratchpad/versions`, 'before'],
            ['GET', `/v1/conversations/{conversation}/scratchpad/versions`, 'limit'],
            ['GET', `/v1/conversations/{conversation}/scratchpad/events`, 'after'],
            ['GET', `/v1/conversations/{conversation}/context-renders`, 'limit'],
          ),
          hugeDigits,
        )
        .map(([[method, template, field], value]) => ({
          method,
          path: `${template.replace('{execution}', executionId).replace('{conversation}', conversation)}?${field}=${value}`,
          field,
        })),
      hugeNumber.map((version) => ({
        method: 'PUT',
        path: `/v1/conversations/${conversation}/scratchpad`,
        body: json({ expected_version: version, scratchpad: { open_items: [{ text: 'y' }] } }),
        headers: JSON_TYPE,
        field: 'expected_version',
      })),
    );
    await fuzz(request, 150, async ({ field, ...r }) => {
      const response = await exercise(r);
      if (response.status >= 400) {
        // A version conflict names the versions; every other refusal names the field.
        const { error } = response.json as ErrorJson;
        if (error.code !== 'version_conflict') {
          expect(error.message, `${r.path} → ${response.text}`).toContain(field);
        }
      }
    });
  });

  // ─── Compressed bodies ────────────────────────────────────────────────────────────────────

  const COMPRESSORS = {
    gzip: gzipSync,
    deflate: deflateSync,
    br: brotliCompressSync,
    // Raw deflate (no zlib header) is what some clients send as "deflate".
    'deflate-raw': deflateRawSync,
  } as const;
  const validBody = fc.constantFrom(
    { action: 'get', operation_id: 'OP' },
    { action: 'progress' },
    { notes: 'compressed note' },
    { persistent_notes: 'keep it short' },
  );
  const damage = fc.oneof(
    fc.record({ kind: fc.constant('truncate' as const), at: fc.nat() }),
    fc.record({ kind: fc.constant('flip' as const), at: fc.nat(), bits: fc.integer({ min: 1, max: 255 }) }),
    fc.record({ kind: fc.constant('append' as const), junk: fc.uint8Array({ minLength: 1, maxLength: 16 }) }),
    fc.record({ kind: fc.constant('stack' as const) }),
    fc.record({ kind: fc.constant('none' as const) }),
  );
  const encodingLabel = fc.oneof(
    { arbitrary: fc.constant('same'), weight: 6 },
    {
      arbitrary: fc.constantFrom(
        'gzip',
        'deflate',
        'br',
        'GZIP',
        'x-gzip',
        'compress',
        'zstd',
        'gzip, br',
        'identity',
        'bogus',
      ),
      weight: 2,
    },
  );

  it('answers compressed bodies that are corrupt, cut short, stacked or mislabelled, never with a 5xx', async () => {
    const arb = fc.tuple(
      validBody,
      fc.constantFrom(...(Object.keys(COMPRESSORS) as (keyof typeof COMPRESSORS)[])),
      damage,
      encodingLabel,
    );
    await fuzz(arb, 200, async ([body, compressor, harm, label]) => {
      const text = JSON.stringify(body).replace('"OP"', JSON.stringify(operationId));
      const tool =
        'notes' in body ? 'write_to_scratchpad' : 'persistent_notes' in body ? 'read_from_scratchpad' : undefined;
      let bytes = COMPRESSORS[compressor](Buffer.from(text));
      if (harm.kind === 'truncate') {
        bytes = bytes.subarray(0, harm.at % bytes.length);
      } else if (harm.kind === 'flip') {
        bytes = Buffer.from(bytes);
        const at = harm.at % bytes.length;
        bytes[at] = (bytes[at] as number) ^ harm.bits;
      } else if (harm.kind === 'append') {
        bytes = Buffer.concat([bytes, Buffer.from(harm.junk)]);
      } else if (harm.kind === 'stack') {
        bytes = COMPRESSORS[compressor](bytes);
      }
      const encoding = label === 'same' ? (compressor === 'deflate-raw' ? 'deflate' : compressor) : label;
      const response = await exercise({
        method: 'POST',
        path: toolPath(tool),
        body: bytes,
        headers: { ...JSON_TYPE, 'content-encoding': encoding },
      });
      // What arrives whole as labelled is read; what does not decompress is named as such.
      if (harm.kind === 'none' && label === 'same' && compressor !== 'deflate-raw') {
        expect(response.status, response.text).toBeLessThan(300);
      }
      if (response.status === 400 && (response.json as ErrorJson).error.code === 'invalid_body_encoding') {
        expect((response.json as ErrorJson).error.details).toMatchObject({ field: '(body)' });
      }
    });
  });

  // ─── UTF-8 ────────────────────────────────────────────────────────────────────────────────

  const INVALID_SEQUENCES: readonly number[][] = [
    [0x80],
    [0xbf],
    [0xc0, 0xaf],
    [0xc1, 0x81],
    [0xe0, 0x80, 0xaf],
    [0xed, 0xa0, 0x80],
    [0xed, 0xbf, 0xbf],
    [0xe2, 0x82],
    [0xf0, 0x9f, 0x98],
    [0xf4, 0x90, 0x80, 0x80],
    [0xf5, 0x80, 0x80, 0x80],
    [0xf8, 0x88, 0x80, 0x80, 0x80],
    [0xfe],
    [0xff],
  ];
  const invalidUtf8 = fc.oneof(
    fc.constantFrom(...INVALID_SEQUENCES),
    fc.array(fc.integer({ min: 0x80, max: 0xff }), { minLength: 1, maxLength: 1 }),
  );

  it('refuses any body that is not UTF-8 with invalid_utf8, wherever the bad bytes are, compressed or not', async () => {
    const bodies = fc.constantFrom(
      ['write_to_scratchpad', { notes: 'a note about café' }],
      ['read_from_scratchpad', { persistent_notes: 'standing order' }],
      ['manage_assistant_operation', { action: 'create', operation_type: 't', total_items: 2, item_ids: ['a', 'b'] }],
      ['update_scratchpad', { add: { facts: [{ text: 'a fact', source_ref: 'user:initial' }] } }],
    );
    const arb = fc.tuple(bodies, invalidUtf8, fc.nat(), fc.boolean(), fc.boolean());
    await fuzz(arb, 200, async ([[tool, body], bad, at, inString, gzip]) => {
      const text = Buffer.from(JSON.stringify(body));
      // Inside a string value (after the first quote of a value), or anywhere in the bytes.
      const quote = text.indexOf('":"');
      const cut = inString && quote > 0 ? quote + 3 : at % (text.length + 1);
      let bytes = Buffer.concat([text.subarray(0, cut), Buffer.from(bad), text.subarray(cut)]);
      // A lone continuation byte right after a lead byte could complete it: never the case here,
      // since the bodies are ASCII but for "é" — keep the check honest regardless.
      const invalid = !Buffer.from(bytes.toString('utf8'), 'utf8').equals(bytes);
      expect(invalid).toBe(true);
      const headers: Record<string, string> = { ...JSON_TYPE };
      if (gzip) {
        bytes = gzipSync(bytes);
        headers['content-encoding'] = 'gzip';
      }
      const response = await exercise({ method: 'POST', path: toolPath(tool, randomUUID()), body: bytes, headers });
      expect(response.status, response.text).toBe(400);
      expect((response.json as ErrorJson).error.code, response.text).toBe('invalid_utf8');
    });
  });

  // ─── Size limits, to the byte ─────────────────────────────────────────────────────────────

  const unit = fc.constantFrom('x', 'é', '€', '😀', '\n', '"', '\\');
  /** A string of about `bytes` UTF-8 bytes as a JSON string's content (escapes counted). */
  const sized = (target: fc.Arbitrary<number>) =>
    fc.tuple(target, unit).map(([bytes, u]) => {
      const per = Buffer.byteLength(JSON.stringify(u)) - 2;
      return `k${u.repeat(Math.max(0, Math.floor((bytes - 1) / per)))}`;
    });
  const around = (limit: number, spread: number) =>
    fc.oneof(
      fc.integer({ min: limit - spread, max: limit + spread }),
      fc.integer({ min: Math.max(1, limit - 8), max: limit + 8 }),
    );
  const stored = (value: unknown) => Buffer.byteLength(JSON.stringify(value));

  it('refuses query_params exactly when their stored JSON is over OPSPAD_MAX_QUERY_PARAMS_BYTES', async () => {
    const limit = LIMITS.OPSPAD_MAX_QUERY_PARAMS_BYTES;
    const arb = fc.tuple(
      sized(around(limit, 300)),
      fc.dictionary(fc.string({ maxLength: 6 }), fc.integer(), { maxKeys: 3 }),
    );
    await fuzz(arb, 120, async ([filler, extra]) => {
      const queryParams = { ...extra, filler };
      const response = await exercise({
        method: 'POST',
        path: toolPath('manage_assistant_operation', randomUUID()),
        body: json({
          action: 'create',
          operation_type: 't',
          total_items: 1,
          item_ids: ['a'],
          query_params: queryParams,
        }),
        headers: JSON_TYPE,
      });
      const over = stored(queryParams) > limit;
      expect(response.status, `${stored(queryParams)} bytes → ${response.text}`).toBe(over ? 400 : 200);
      if (over) {
        expect((response.json as ErrorJson).error.message).toContain('OPSPAD_MAX_QUERY_PARAMS_BYTES');
      }
    });
  });

  it('refuses a note exactly when it is over OPSPAD_MAX_NOTE_BYTES in UTF-8', async () => {
    const limit = LIMITS.OPSPAD_MAX_NOTE_BYTES;
    const note = fc
      .tuple(around(limit, 40), fc.constantFrom('x', 'é', '€', '😀'))
      .map(([bytes, u]) => u.repeat(Math.max(1, Math.floor(bytes / Buffer.byteLength(u)))));
    const arb = fc.tuple(
      note,
      fc.constantFrom('write_to_scratchpad', 'read_from_scratchpad', 'manage_assistant_operation'),
    );
    await fuzz(arb, 120, async ([text, tool]) => {
      const sent = tool === 'manage_assistant_operation' ? text.slice(0, 2000) : text;
      const body =
        tool === 'write_to_scratchpad'
          ? { notes: sent }
          : tool === 'read_from_scratchpad'
            ? { persistent_notes: sent }
            : { action: 'create', operation_type: 't', total_items: 1, item_ids: ['a'], notes: sent };
      const response = await exercise({
        method: 'POST',
        path: toolPath(tool, randomUUID()),
        body: json(body),
        headers: JSON_TYPE,
      });
      const over = Buffer.byteLength(sent) > limit;
      expect(response.status, `${Buffer.byteLength(sent)} bytes → ${response.text}`).toBe(over ? 400 : 200);
      if (over) {
        expect((response.json as ErrorJson).error.message).toContain('OPSPAD_MAX_NOTE_BYTES');
      }
    });
  });

  it('refuses an item id exactly when it is over OPSPAD_MAX_ITEM_ID_LENGTH', async () => {
    const limit = LIMITS.OPSPAD_MAX_ITEM_ID_LENGTH;
    const arb = fc.tuple(fc.integer({ min: limit - 5, max: limit + 5 }), fc.nat({ max: 4 }));
    await fuzz(arb, 60, async ([length, at]) => {
      const itemIds = ['a', 'b', 'c', 'd', 'e'];
      itemIds[at] = `${at}`.padEnd(length, 'z');
      const response = await exercise({
        method: 'POST',
        path: toolPath('manage_assistant_operation', randomUUID()),
        body: json({ action: 'create', operation_type: 't', total_items: 5, item_ids: itemIds }),
        headers: JSON_TYPE,
      });
      expect(response.status, response.text).toBe(length > limit ? 400 : 200);
      if (length > limit) {
        expect((response.json as ErrorJson).error.message).toContain(`item_ids[${at}]`);
      }
    });
  });

  it('refuses a pad exactly when its stored JSON is over OPSPAD_MAX_SCRATCHPAD_BYTES, compressed or not', async () => {
    const limit = LIMITS.OPSPAD_MAX_SCRATCHPAD_BYTES;
    const arb = fc.tuple(
      fc.integer({ min: 100, max: 400 }),
      fc.integer({ min: limit - 600, max: limit + 600 }),
      unit,
      fc.boolean(),
    );
    await fuzz(arb, 80, async ([entries, target, u, gzip]) => {
      const skeleton = {
        schema: 'opspad.scratchpad.v1',
        goals: [],
        open_items: [] as { text: string }[],
        facts: [],
        refs: [],
      };
      const per = Math.max(1, Math.floor((target - stored(skeleton)) / entries) - '{"text":""},'.length);
      const unitBytes = Buffer.byteLength(JSON.stringify(u)) - 2;
      for (let i = 0; i < entries; i++) {
        skeleton.open_items.push({ text: `${i}${u.repeat(Math.max(0, Math.floor(per / unitBytes) - 3))}` });
      }
      // Stored texts are trimmed: keep them free of leading and trailing whitespace.
      for (const item of skeleton.open_items) {
        item.text = `${item.text}.`;
      }
      const payload = json({ expected_version: 0, scratchpad: { open_items: skeleton.open_items } });
      const response = await exercise({
        method: 'PUT',
        path: `/v1/conversations/${randomUUID()}/scratchpad`,
        body: gzip ? gzipSync(payload) : payload,
        headers: gzip ? { ...JSON_TYPE, 'content-encoding': 'gzip' } : JSON_TYPE,
      });
      const over = stored(skeleton) > limit;
      expect(response.status, `${stored(skeleton)} bytes → ${response.text.slice(0, 300)}`).toBe(over ? 400 : 200);
      if (over) {
        expect((response.json as ErrorJson).error.message).toContain('OPSPAD_MAX_SCRATCHPAD_BYTES');
      }
    });
  });
});
