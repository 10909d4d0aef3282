/**
 * `GET /v1/operations/:id/results` (JSON Lines and CSV), `client.operations.results` and
 * `opspad ops export` against a real opspad on Postgres: every line parses, in item order with
 * each item's outcome; the failed set equals the ledger's; awkward ids (commas, quotes, line
 * breaks, formula starters) round-trip through CSV; foreign ids answer 404, bad queries 400.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient, type ItemResult, type OpspadClient, OpspadError } from '../../src/client/index.ts';
import { parseCsvCell, RESULT_COLUMNS } from '../../src/domain/item-results.ts';
import { FAILURE_SHAPE } from '../helpers/failure-shape.ts';
import { type Harness, ids, startHarness, type Tenant } from '../helpers/harness.ts';
import { runOpspad } from '../helpers/processes.ts';
import { eventually } from '../helpers/wait.ts';

/** Ids a spreadsheet or a naive CSV writer would mangle. */
const AWKWARD = [
  '=SUM(A1:A2)',
  '+1',
  '-2',
  '@cmd',
  '\tTab',
  "'apostrophe",
  'a,b',
  'say "hi"',
  'line\nbreak',
  'cr\r\nlf',
  'ünïcødé ✓',
  ' spaced ',
];
/** Over two pages of the server's reads (1,000 rows each). */
const ITEMS = [...AWKWARD, ...ids(2500 - AWKWARD.length)];
const BATCH = 1000;
/** The key's long responses at once: event streams and results files together. */
const MAX_STREAMS = 2;

/** RFC 4180 rows of `text` (quoted cells may hold commas, quotes and line breaks). */
function parseCsv(text: string): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let cell = '';
  let quoted = false;
  for (let i = 0; i < text.length; i += 1) {
    const c = text[i];
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') {
        cell += '"';
        i += 1;
      } else if (c === '"') {
        quoted = false;
      } else {
        cell += c;
      }
    } else if (c === '"') {
      quoted = true;
    } else if (c === ',') {
      row.push(cell);
      cell = '';
    } else if (c === '\r' && text[i + 1] === '\n') {
      row.push(cell);
      rows.push(row);
      row = [];
      cell = '';
      i += 1;
    } else {
      cell += c;
    }
  }
  expect(cell, 'the file ends with a line break').toBe('');
  expect(row).toEqual([]);
  return rows;
}

describe('an operation’s results as one file (postgres)', () => {
  let harness: Harness;
  let tenant: Tenant;
  let client: OpspadClient;
  let operationId: string;
  /** What was recorded of each item. */
  const failedReasons = new Map<string, string>();
  const completed = new Set<string>();
  const leased = new Set<string>();

  const download = (query: string, key = tenant.apiKey) =>
    fetch(`${harness.url}/v1/operations/${operationId}/results${query}`, {
      headers: { authorization: `Bearer ${key}` },
    });

  beforeAll(async () => {
    harness = await startHarness('postgres', { env: { OPSPAD_MAX_STREAMS_PER_KEY: String(MAX_STREAMS) } });
    tenant = await harness.newTenant();
    client = createClient({ baseUrl: harness.url, apiKey: tenant.apiKey });
    const conversation = randomUUID();
    const created = await client.operations.create(conversation, {
      operation_type: 'send_sms',
      total_items: ITEMS.length,
      item_ids: ITEMS,
      batch_size: BATCH,
    });
    operationId = created.operation_id;
    // Two batches recorded (every third item failing, with an awkward reason), the third leased.
    for (let round = 0; round < 2; round += 1) {
      const batch = await client.operations.progress(conversation, { operation_id: operationId });
      const batchIds = batch.batch ?? [];
      expect(batchIds).toHaveLength(BATCH);
      const failed = batchIds
        .filter((_, i) => i % 3 === 0)
        .map((id) => ({ id, reason: `=HYPERLINK("x"), "quoted", line\nbreak for ${id}` }));
      const done = batchIds.filter((_, i) => i % 3 !== 0);
      await client.operations.update(conversation, { operation_id: operationId, completed_ids: done, failed });
      for (const f of failed) {
        failedReasons.set(f.id, f.reason);
      }
      for (const id of done) {
        completed.add(id);
      }
    }
    const third = await client.operations.progress(conversation, { operation_id: operationId });
    for (const id of third.batch ?? []) {
      leased.add(id);
    }
    expect(leased.size).toBe(ITEMS.length - 2 * BATCH);
  });
  afterAll(async () => {
    await harness?.close();
  });

  it('streams one JSON line per item, in item order, with each outcome', async () => {
    const response = await download('');
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('application/x-ndjson; charset=utf-8');
    expect(response.headers.get('content-disposition')).toBe(`attachment; filename="operation-${operationId}.jsonl"`);
    const text = await response.text();
    expect(text.endsWith('\n')).toBe(true);
    const lines = text.slice(0, -1).split('\n');
    const items = lines.map((line) => JSON.parse(line) as ItemResult);
    expect(items.map((item) => item.item_id)).toEqual(ITEMS);
    for (const item of items) {
      expect(Object.keys(item)).toEqual([...RESULT_COLUMNS]);
      if (failedReasons.has(item.item_id)) {
        expect(item).toMatchObject({ status: 'failed', reason: failedReasons.get(item.item_id), attempts: 1 });
        expect(Date.parse(item.recorded_at ?? '')).not.toBeNaN();
      } else if (completed.has(item.item_id)) {
        expect(item).toMatchObject({ status: 'completed', reason: null, attempts: 1 });
        expect(Date.parse(item.recorded_at ?? '')).not.toBeNaN();
      } else {
        expect(leased.has(item.item_id)).toBe(true);
        expect(item).toEqual({ item_id: item.item_id, status: 'leased', reason: null, attempts: 0, recorded_at: null });
      }
    }
  });

  it('writes only the failures with status=failed: the same set as the ledger’s, in order', async () => {
    const ledger = await harness.db.query<{ item_id: string; reason: string }>(
      `SELECT item_id, reason FROM assistant_operation_item WHERE operation_id = $1 AND status = 'failed' ORDER BY ordinal`,
      [operationId],
    );
    expect(ledger).toHaveLength(failedReasons.size);
    const exported: ItemResult[] = [];
    for await (const item of client.operations.results(operationId, { failed: true })) {
      exported.push(item);
    }
    expect(exported.map((item) => [item.item_id, item.reason])).toEqual(ledger.map((row) => [row.item_id, row.reason]));
    expect(exported.every((item) => item.status === 'failed')).toBe(true);
    const status = await client.operations.status(operationId);
    expect(exported).toHaveLength(status.failed_count);
  });

  it('round-trips awkward ids and reasons through CSV, no cell starting a formula', async () => {
    const response = await download('?format=csv');
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('text/csv; charset=utf-8');
    const [header, ...rows] = parseCsv(await response.text());
    expect(header).toEqual([...RESULT_COLUMNS]);
    expect(rows).toHaveLength(ITEMS.length);
    expect(rows.map((row) => parseCsvCell(row[0] ?? ''))).toEqual(ITEMS);
    for (const row of rows) {
      expect(row).toHaveLength(RESULT_COLUMNS.length);
      for (const cell of row) {
        expect(cell).not.toMatch(/^[=+\-@\t\r]/);
      }
      const id = parseCsvCell(row[0] ?? '');
      if (failedReasons.has(id)) {
        expect([row[1], parseCsvCell(row[2] ?? ''), row[3]]).toEqual(['failed', failedReasons.get(id), '1']);
      }
    }
    const failedOnly = parseCsv(await (await download('?format=csv&status=failed')).text()).slice(1);
    expect(failedOnly.map((row) => parseCsvCell(row[0] ?? '')).sort()).toEqual([...failedReasons.keys()].sort());
  });

  it('answers 404 for another organization’s operation and 400 naming a bad query, before any line', async () => {
    const stranger = await harness.newTenant();
    const foreign = await download('', stranger.apiKey);
    expect(foreign.status).toBe(404);
    expect(((await foreign.json()) as { error: { code: string } }).error.code).toBe('not_found');
    const error = await createClient({ baseUrl: harness.url, apiKey: stranger.apiKey })
      .operations.results(operationId)
      .next()
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(error).toBeInstanceOf(OpspadError);
    expect((error as OpspadError).status).toBe(404);

    const bad = await download('?format=xlsx&status=done');
    expect(bad.status).toBe(400);
    const message = ((await bad.json()) as { error: { message: string } }).error.message;
    expect(message).toContain('format');
    expect(message).toContain('must be jsonl or csv');
  });

  it('counts a file among the key’s streams: 429 too_many_streams beyond them, until one closes', async () => {
    const held = await Promise.all(
      Array.from({ length: MAX_STREAMS }, async () => {
        const events = new AbortController();
        const response = await fetch(`${harness.url}/v1/operations/${operationId}/events`, {
          headers: { authorization: `Bearer ${tenant.apiKey}` },
          signal: events.signal,
        });
        expect(response.status).toBe(200);
        return events;
      }),
    );
    const refused = await download('?format=csv');
    expect(refused.status).toBe(429);
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('too_many_streams');
    for (const events of held) {
      events.abort();
    }
    const served = await eventually(
      async () => {
        const response = await download('?status=failed');
        return response.status === 200 ? response : void (await response.body?.cancel());
      },
      { what: 'a slot freed by the closed event streams' },
    );
    expect((await served.text()).split('\n').length - 1).toBe(failedReasons.size);
  });

  it('`opspad ops export` writes the same file to stdout, and fails in the one shape', async () => {
    const env = { OPSPAD_URL: harness.url, OPSPAD_API_KEY: tenant.apiKey };
    const run = await runOpspad(['ops', 'export', operationId, '--format', 'csv', '--failed'], env);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    expect(run.stdout).toBe(await (await download('?format=csv&status=failed')).text());

    const stranger = await harness.newTenant();
    const refused = await runOpspad(['ops', 'export', operationId], { ...env, OPSPAD_API_KEY: stranger.apiKey });
    expect(refused.code).toBe(1);
    expect(refused.stdout).toBe('');
    expect(refused.stderr).toMatch(FAILURE_SHAPE);
    expect(refused.stderr).toContain(`opspad ops export: operation ${operationId} was not found at ${harness.url}.`);
  });
});
