/**
 * The operator view's live updates (`/admin/operations/stream`): changed rows, new audit-trail
 * entries and the count of newer operations, a bound on the streams a process serves — and the
 * view on the embedded database (PGlite), where the same statements run.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_OPERATOR_STREAMS } from '../../src/api/operator-view/stream.ts';
import { type Harness, ids, startHarness } from '../helpers/harness.ts';
import { type EventStream, openEventStream } from '../helpers/sse.ts';

describe('the operator view, live (postgres)', () => {
  let harness: Harness;

  beforeAll(async () => {
    harness = await startHarness('postgres');
  });
  afterAll(async () => {
    await harness?.close();
  });

  const admin = (path: string) =>
    fetch(`${harness.url}${path}`, { headers: { authorization: harness.adminAuthorization } });

  it('streams changed rows, new audit entries and the count of newer operations', async () => {
    const watcher = await harness.newTenant();
    const conv = randomUUID();
    const created = await watcher.op(conv, {
      action: 'create',
      operation_type: 'watched',
      total_items: 5,
      item_ids: ids(5),
    });
    const id = created.body.operation_id as string;
    const stream = await openEventStream(
      `${harness.url}/admin/operations/stream?ids=${id}&audit_after=0&q=${watcher.organizationId}&newer_than=${id}`,
      '',
      { authorization: harness.adminAuthorization },
    );
    expect(stream.headers.get('content-type')).toContain('text/event-stream');
    const first = await stream.until((f) => f.event === 'row');
    expect(JSON.parse(first.data).html).toContain('<span class="recorded">0</span>/5');
    expect(JSON.parse((await stream.until((f) => f.event === 'newer')).data)).toEqual({ count: 0 });

    await watcher.op(conv, {
      action: 'update',
      operation_id: id,
      completed_ids: ['contact-1', 'contact-2'],
      failed: [],
    });
    const moved = await stream.until(
      (f) => f.event === 'row' && f.data.includes('<span class=\\"recorded\\">2</span>'),
    );
    expect(JSON.parse(moved.data).id).toBe(id);
    await watcher.op(conv, { action: 'pause', operation_id: id });
    const audit = await stream.until((f) => f.event === 'audit' && f.data.includes('paused'));
    expect(Number(audit.id)).toBeGreaterThan(0);
    await watcher.op(randomUUID(), { action: 'create', operation_type: 'newer', total_items: 1, item_ids: ['z'] });
    expect(JSON.parse((await stream.until((f) => f.event === 'newer')).data)).toEqual({ count: 1 });
    await stream.close();

    const bad = await admin('/admin/operations/stream?ids=not-an-id');
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { message: string } }).error.message).toContain('ids');
  });

  it(`serves at most ${MAX_OPERATOR_STREAMS} live pages per process, and one more once one closes`, async () => {
    const streams: EventStream[] = [];
    const open = () =>
      openEventStream(`${harness.url}/admin/operations/stream`, '', { authorization: harness.adminAuthorization });
    try {
      for (let i = 0; i < MAX_OPERATOR_STREAMS; i++) {
        const stream = await open();
        expect(stream.status).toBe(200);
        streams.push(stream);
      }
      const refused = await admin('/admin/operations/stream');
      expect(refused.status).toBe(429);
      expect(refused.headers.get('retry-after')).toBe('5');
      expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('too_many_streams');
      await streams.pop()?.close();
      // The server notices the hang-up at its next poll: then there is room again.
      const again = await eventuallyOpen(open);
      streams.push(again);
    } finally {
      await Promise.all(streams.map((s) => s.close()));
    }
  });
});

/** Opens a stream, retrying while the server has not yet noticed a closed one (bounded). */
async function eventuallyOpen(open: () => Promise<EventStream>): Promise<EventStream> {
  for (let attempt = 0; attempt < 100; attempt++) {
    const stream = await open();
    if (stream.status === 200) {
      return stream;
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error('no room for a live page after one closed');
}

describe('the operator view (pglite)', () => {
  let harness: Harness;

  beforeAll(async () => {
    harness = await startHarness('pglite');
  });
  afterAll(async () => {
    await harness?.close();
  });

  it('lists, searches, pages and shows an operation on the embedded database too', async () => {
    const tenant = await harness.newTenant();
    const conv = randomUUID();
    const made: string[] = [];
    for (let i = 0; i < 3; i++) {
      const created = await tenant.op(conv, {
        action: 'create',
        operation_type: `embedded_${i}`,
        total_items: 3,
        item_ids: ids(3, `embedded-${i}`),
      });
      made.push(created.body.operation_id as string);
    }
    await tenant.op(conv, {
      action: 'update',
      operation_id: made[2],
      completed_ids: ['embedded-2-1'],
      failed: [{ id: 'embedded-2-2', reason: 'bounced' }],
    });
    const get = async (path: string) => {
      const response = await fetch(`${harness.url}${path}`, { headers: { authorization: harness.adminAuthorization } });
      expect(response.status, path).toBe(200);
      return response.text();
    };
    const first = await get(`/admin/operations?q=${tenant.organizationId}&limit=2`);
    expect(first).toContain('Showing 1–2 of 3');
    expect(await get(`/admin/operations?q=${tenant.organizationId}&limit=2&older_than=${made[1]}`)).toContain(
      'Showing 3–3 of 3',
    );
    expect(await get('/admin/operations?q=embedded-0-3')).toContain(`data-operation-id="${made[0]}"`);
    const detail = await get(`/admin/operations/${made[2]}`);
    expect(detail).toMatch(/<td class="reason">bounced<\/td><td class="group-count">1<\/td>/);
    expect(detail).toMatch(/<td class="kind">created<\/td>/);
    expect(detail).toMatch(/<span class="pace">[\d.,]+\/(s|min)<\/span>/);
  });
});
