/**
 * Large creates stream: the ids of a create go into the database while its body is still
 * arriving (api/operation-body.ts, tools/streamed-create.ts, store/operations/item-copy.ts), the server
 * keeps answering everyone else meanwhile, and a bad body anywhere — start, middle or end of a
 * huge stream — gets the answer a whole body gets, with nothing stored.
 *
 * The database is this file's own: "nothing stored" is checked on the whole item table.
 */

import { randomUUID } from 'node:crypto';
import http from 'node:http';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OperationToolInput } from '../../src/domain/operation-input.ts';
import { findDuplicates, findUnstorableValue, validationError } from '../../src/domain/validation.ts';
import { createOperationFromStream } from '../../src/store/operations/item-copy.ts';
import { normalizeFlatInput } from '../../src/tools/flat-input.ts';
import { counting, type Harness, startHarness, type Tenant } from '../helpers/harness.ts';
import { type PrivateDatabase, privatePostgresDatabase } from '../helpers/private-database.ts';

const TOOL = 'manage_assistant_operation';
const MILLION = 1_000_000;
const LARGE = 200_000;

function idsOf(count: number, prefix = 'item'): string[] {
  return Array.from({ length: count }, (_, i) => `${prefix}-${String(i).padStart(8, '0')}`);
}

function createInput(itemIds: readonly unknown[], extra: Record<string, unknown> = {}) {
  return { action: 'create', operation_type: 'bulk_tag', total_items: itemIds.length, item_ids: itemIds, ...extra };
}

/** What a whole body gets from the schema and the unstorable-value check: the message to expect. */
function wholeBodyMessage(body: Record<string, unknown>): string {
  const unstorable = findUnstorableValue(body);
  if (unstorable) {
    return `Invalid input: ${unstorable.field}: ${unstorable.message}`;
  }
  const parsed = OperationToolInput.safeParse(normalizeFlatInput(body));
  if (parsed.success) {
    throw new Error('the body is valid');
  }
  return validationError(parsed.error, `${TOOL} input`).message;
}

interface Sent {
  status: number;
  json: { error?: { code: string; message: string; details?: Record<string, unknown> } } & Record<string, unknown>;
}

/** A POST whose body is written in `parts`; `between` runs after each part but the last. */
function postInParts(
  url: string,
  path: string,
  headers: Record<string, string>,
  parts: readonly Buffer[],
  between?: (index: number) => Promise<void>,
): Promise<Sent> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const req = http.request({ host: hostname, port, method: 'POST', path, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, json: JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}') }),
      );
      res.on('error', reject);
    });
    req.on('error', reject);
    void (async () => {
      for (const [index, part] of parts.entries()) {
        if (!req.write(part)) {
          await new Promise((drained) => req.once('drain', drained));
        }
        if (index < parts.length - 1) {
          await between?.(index);
        }
      }
      req.end();
    })().catch(reject);
  });
}

describe('large creates stream their ids into the database (Postgres)', () => {
  let database: PrivateDatabase;
  let harness: Harness;
  let tenant: Tenant;

  beforeAll(async () => {
    database = await privatePostgresDatabase('create_stream');
    harness = await startHarness('postgres', { databaseUrl: database.url });
    tenant = await harness.newTenant();
  }, 60_000);

  afterAll(async () => {
    await harness?.close();
    await database?.drop();
  });

  const path = (conversation: string) => `/v1/conversations/${conversation}/tools/${TOOL}`;
  const headers = (extra: Record<string, string> = {}) => ({
    authorization: `Bearer ${tenant.apiKey}`,
    'content-type': 'application/json',
    ...extra,
  });
  const send = (conversation: string, body: Buffer | string, extra?: Record<string, string>) =>
    postInParts(harness.url, path(conversation), headers(extra), [Buffer.from(body)]);

  async function storedItems(): Promise<number> {
    const rows = await harness.db.query<{ n: number }>('SELECT count(*)::int AS n FROM assistant_operation_item');
    return rows[0]?.n ?? 0;
  }

  async function operationsOf(conversation: string): Promise<number> {
    const rows = await harness.db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM assistant_operation WHERE conversation_id = $1',
      [conversation],
    );
    return rows[0]?.n ?? 0;
  }

  /** Rows the COPY of another session has processed so far (pg_stat_progress_copy), 0 when none runs. */
  async function copyProgress(): Promise<number> {
    const rows = await harness.db.query<{ n: number }>(
      `SELECT coalesce(max(p.tuples_processed), 0)::int AS n FROM pg_stat_progress_copy p
       JOIN pg_database d ON d.oid = p.datid WHERE d.datname = current_database()`,
    );
    return rows[0]?.n ?? 0;
  }

  it('answers /healthz while a 1,000,000-id create is half read, whose ids are already in the COPY', async () => {
    const conversation = randomUUID();
    const ids = idsOf(MILLION);
    const text = JSON.stringify(createInput(ids, { batch_size: 100 }));
    const half = text.indexOf(ids[MILLION / 2] as string);
    const parts = [Buffer.from(text.slice(0, half)), Buffer.from(text.slice(half))];
    const events: string[] = [];
    const created = postInParts(harness.url, path(conversation), headers(), parts, async () => {
      // The first half is sent and the body is not complete. The server copies its ids as they
      // come (COPY statements of 100,000 rows): wait until one is well under way. A server that
      // parses the body in one piece starts no COPY before the body is complete, and this loop
      // gives up (within the 30 s a body may pause).
      const enough = 50_000;
      let copied = 0;
      for (let attempt = 0; attempt < 400 && copied < enough; attempt++) {
        copied = await copyProgress();
        if (copied < enough) {
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
      }
      events.push(`copied ${copied >= enough ? 'half' : 'too little'}`);
      const health = await harness.request('/healthz');
      events.push(`healthz ${health.status}`);
    }).then((response) => {
      events.push(`create ${response.status}`);
      return response;
    });
    const response = await created;
    expect(events).toEqual(['copied half', 'healthz 200', 'create 200']);
    expect(response.json).toMatchObject({ status: 'active', total_items: MILLION, batch_size: 100 });
    const rows = await harness.db.query<{ ordinal: number; item_id: string }>(
      `SELECT ordinal, item_id FROM assistant_operation_item WHERE operation_id = $1 AND ordinal IN (0, 500000, 999999)
       ORDER BY ordinal`,
      [response.json.operation_id],
    );
    expect(rows).toEqual([
      { ordinal: 0, item_id: ids[0] },
      { ordinal: 500_000, item_id: ids[500_000] },
      { ordinal: 999_999, item_id: ids[999_999] },
    ]);
    const counted = await harness.db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM assistant_operation_item WHERE operation_id = $1',
      [response.json.operation_id],
    );
    expect(counted[0]?.n).toBe(MILLION);
  }, 180_000);

  describe('a bad body anywhere in a huge stream: the whole body’s answer, nothing stored', () => {
    const cases: { name: string; at: number; bad: unknown }[] = [
      { name: 'an empty id at the start', at: 0, bad: '' },
      { name: 'a number in the middle', at: LARGE / 2, bad: 42 },
      { name: 'a NUL character in the middle', at: LARGE / 2 + 7, bad: 'a\u0000b' },
      { name: 'an id of 513 characters at the end', at: LARGE - 1, bad: 'x'.repeat(513) },
      { name: 'a lone surrogate at the end', at: LARGE - 1, bad: 'a\ud800' },
      {
        name: 'an object nested too deep at the end',
        at: LARGE - 1,
        bad: JSON.parse('['.repeat(120) + ']'.repeat(120)),
      },
    ];
    for (const { name, at, bad } of cases) {
      it(name, async () => {
        const before = await storedItems();
        const conversation = randomUUID();
        const ids: unknown[] = idsOf(LARGE);
        ids[at] = bad;
        const body = createInput(ids);
        const response = await send(conversation, JSON.stringify(body));
        expect(response.status).toBe(400);
        expect(response.json.error?.message).toBe(wholeBodyMessage(body));
        expect(await operationsOf(conversation)).toBe(0);
        expect(await storedItems()).toBe(before);
      }, 60_000);
    }

    it('issues of the ids and of fields after them, in the schema’s order, counted in full', async () => {
      const before = await storedItems();
      const conversation = randomUUID();
      const ids: unknown[] = idsOf(LARGE);
      for (let i = 1000; i < 1030; i++) {
        ids[i] = i % 2 === 0 ? '' : null;
      }
      // batch_size after item_ids, operation_type before it
      const body = { action: 'create', operation_type: 7, total_items: LARGE, item_ids: ids, batch_size: 'x' };
      const response = await send(conversation, JSON.stringify(body));
      expect(response.status).toBe(400);
      expect(response.json.error?.message).toBe(wholeBodyMessage(body));
      expect(response.json.error?.details?.total_issues).toBe(32);
      expect(await storedItems()).toBe(before);
    }, 60_000);

    it('total_items that does not match, sent after the ids', async () => {
      const before = await storedItems();
      const conversation = randomUUID();
      const ids = idsOf(LARGE);
      const text = `{"action":"create","operation_type":"bulk_tag","item_ids":${JSON.stringify(ids)},"total_items":${LARGE + 1}}`;
      const response = await send(conversation, text);
      expect(response.status).toBe(400);
      expect(response.json.error?.message).toBe(
        `Invalid input: total_items: is ${LARGE + 1} but item_ids holds ${LARGE} ids; they must be equal.`,
      );
      expect(await storedItems()).toBe(before);
    }, 60_000);

    it('a repeated id near the end: named, as the whole body’s answer names it', async () => {
      const before = await storedItems();
      const conversation = randomUUID();
      const ids = idsOf(LARGE);
      ids[LARGE - 2] = ids[12] as string;
      const response = await send(conversation, JSON.stringify(createInput(ids)));
      expect(response.status).toBe(400);
      expect(response.json.error).toMatchObject({
        code: 'duplicate_item_ids',
        message: `Invalid input: item_ids: each id must appear once; repeated: "${ids[12]}".`,
        details: { field: 'item_ids', duplicate_ids: [ids[12]] },
      });
      expect(await storedItems()).toBe(before);
    }, 60_000);

    it('repeated ids across the stream: the first 20 named in the order of their first repeat', async () => {
      const before = await storedItems();
      const conversation = randomUUID();
      const ids = idsOf(LARGE);
      // Repeats inside the first COPY segment, across segments, and of ids repeated twice.
      for (let k = 0; k < 25; k++) {
        ids[50_000 + k * 6_000] = ids[k * 7] as string;
      }
      ids[LARGE - 1] = ids[0] as string;
      const repeated = findDuplicates(ids, 21);
      expect(repeated.length).toBe(21);
      const response = await send(conversation, JSON.stringify(createInput(ids)));
      expect(response.status).toBe(400);
      expect(response.json.error).toMatchObject({
        code: 'duplicate_item_ids',
        message: `Invalid input: item_ids: each id must appear once; repeated: ${repeated
          .slice(0, 20)
          .map((id) => JSON.stringify(id))
          .join(', ')} and more.`,
        details: { field: 'item_ids', duplicate_ids: repeated.slice(0, 20) },
      });
      expect(await storedItems()).toBe(before);
    }, 60_000);

    it('repeated long ids: named the same when a COPY segment is cut by its bytes, not its rows', async () => {
      const before = await storedItems();
      // 30,000 ids of 500 characters are about 16 MB of rows: segments of 8 MB, about 15,700
      // rows. The first repeat is in the second segment, which alone is replayed to name them.
      const ids = idsOf(30_000).map((id) => id.padEnd(500, '.'));
      for (let k = 0; k < 22; k++) {
        ids[16_500 + k * 500] = ids[k * 11] as string;
      }
      const repeated = findDuplicates(ids, 21);
      expect(repeated.length).toBe(21);
      const response = await send(randomUUID(), JSON.stringify(createInput(ids)));
      expect(response.status).toBe(400);
      expect(response.json.error).toMatchObject({
        code: 'duplicate_item_ids',
        details: { field: 'item_ids', duplicate_ids: repeated.slice(0, 20) },
      });
      expect(await storedItems()).toBe(before);
    }, 60_000);

    it('a COPY segment ends at 8 MB of rows as well as at 100,000 rows', async () => {
      /** COPY statements (segments) of a streamed create of `ids`, written 1,000 at a time. */
      const segmentsOf = async (ids: readonly string[]) => {
        const { db, sent } = counting(harness.db);
        const scope = { organizationId: tenant.organizationId, conversationId: randomUUID() };
        await createOperationFromStream(db, scope, async (sink) => {
          for (let start = 0; start < ids.length; start += 1_000) {
            await sink.write(ids.slice(start, start + 1_000));
          }
          return {
            operationType: 'bulk_tag',
            batchSize: 100,
            queryParams: null,
            notes: null,
            execution: 'assistant',
            actor: 'test',
          };
        });
        return sent().filter((text) => text === 'SAVEPOINT item_copy').length;
      };
      // 30,000 ids: one segment by count; of 500 characters they are about 16 MB of rows: two.
      expect(await segmentsOf(idsOf(30_000, 'short'))).toBe(1);
      expect(await segmentsOf(idsOf(30_000, 'long').map((id) => id.padEnd(500, '.')))).toBe(2);
    }, 60_000);

    it('JSON that breaks at the very end, and a gzip body cut short', async () => {
      const before = await storedItems();
      const text = JSON.stringify(createInput(idsOf(LARGE)));
      const broken = await send(randomUUID(), `${text.slice(0, -1)},}`);
      expect(broken.status).toBe(400);
      expect(broken.json.error?.code).toBe('invalid_json');
      const zipped = gzipSync(text);
      const cut = await send(randomUUID(), zipped.subarray(0, zipped.length - 40), { 'content-encoding': 'gzip' });
      expect(cut.status).toBe(400);
      expect(cut.json.error?.code).toBe('invalid_body_encoding');
      const latin1 = await send(
        randomUUID(),
        Buffer.concat([Buffer.from(text.slice(0, -2)), Buffer.from([0xe9, 0x5d, 0x7d])]),
      );
      expect(latin1.status).toBe(400);
      expect(latin1.json.error?.code).toBe('invalid_utf8');
      expect(await storedItems()).toBe(before);
    }, 60_000);
  });

  it('a gzip body streams too, and its ids arrive as sent', async () => {
    const conversation = randomUUID();
    const ids = idsOf(LARGE, 'zipped\t\\é😀名');
    const response = await send(conversation, gzipSync(JSON.stringify(createInput(ids))), {
      'content-encoding': 'gzip',
    });
    expect(response.status).toBe(200);
    const rows = await harness.db.query<{ item_id: string }>(
      'SELECT item_id FROM assistant_operation_item WHERE operation_id = $1 AND ordinal = $2',
      [response.json.operation_id, LARGE - 1],
    );
    expect(rows[0]?.item_id).toBe(ids[LARGE - 1]);
  }, 60_000);
});

describe('the limits hold for streamed bodies', () => {
  let database: PrivateDatabase;
  let harness: Harness;
  let tenant: Tenant;

  beforeAll(async () => {
    database = await privatePostgresDatabase('create_stream_limits');
    harness = await startHarness('postgres', {
      databaseUrl: database.url,
      env: { OPSPAD_MAX_ITEMS: '15000', OPSPAD_MAX_BODY_BYTES: '2000000' },
    });
    tenant = await harness.newTenant();
  }, 60_000);

  afterAll(async () => {
    await harness?.close();
    await database?.drop();
  });

  const sendZipped = (input: unknown) =>
    postInParts(
      harness.url,
      `/v1/conversations/${randomUUID()}/tools/${TOOL}`,
      { authorization: `Bearer ${tenant.apiKey}`, 'content-type': 'application/json', 'content-encoding': 'gzip' },
      [gzipSync(JSON.stringify(input))],
    );

  async function storedItems(): Promise<number> {
    const rows = await harness.db.query<{ n: number }>('SELECT count(*)::int AS n FROM assistant_operation_item');
    return rows[0]?.n ?? 0;
  }

  it('more ids than OPSPAD_MAX_ITEMS: too_many_items, counted to the end, nothing stored', async () => {
    const response = await sendZipped(createInput(idsOf(20_000)));
    expect(response.status).toBe(400);
    expect(response.json.error).toMatchObject({
      code: 'too_many_items',
      details: { field: 'item_ids', count: 20_000, max_items: 15_000 },
    });
    expect(await storedItems()).toBe(0);
  }, 60_000);

  it('a gzip body that inflates past OPSPAD_MAX_BODY_BYTES while its ids stream: 413, nothing stored', async () => {
    const response = await sendZipped(createInput(idsOf(150_000)));
    expect(response.status).toBe(413);
    expect(response.json.error).toMatchObject({ code: 'body_too_large', details: { limit_bytes: 2_000_000 } });
    expect(await storedItems()).toBe(0);
  }, 60_000);
});

describe('large creates on the embedded database (PGlite)', () => {
  let harness: Harness;

  beforeAll(async () => {
    harness = await startHarness('pglite');
  }, 60_000);

  afterAll(async () => {
    await harness?.close();
  });

  it('reads a 30,000-id body as it arrives and creates the operation, refusing a bad id the same way', async () => {
    const tenant = await harness.newTenant();
    const ids = idsOf(30_000, 'embedded-contact-with-a-longer-id');
    const created = await tenant.op(randomUUID(), createInput(ids));
    expect(created.status).toBe(200);
    expect(created.body).toMatchObject({ total_items: 30_000 });
    const bad: unknown[] = [...ids];
    bad[29_999] = '';
    const refused = await tenant.op(randomUUID(), createInput(bad));
    expect(refused.status).toBe(400);
    expect((refused.body as { error: { message: string } }).error.message).toBe(wholeBodyMessage(createInput(bad)));
  }, 120_000);
});
