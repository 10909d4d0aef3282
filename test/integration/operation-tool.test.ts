/**
 * The operation tool over HTTP, on real Postgres and on PGlite: the reference flow end to end,
 * leases, auto-pause, races, cancel, get and retry_failed.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ENGINES, type Harness, ids, startHarness, type Tenant } from '../helpers/harness.ts';
import { expireLeases } from '../helpers/item-states.ts';

interface Progress {
  operation_id: string;
  status: string;
  batch: string[];
  cursor: number;
  total_items: number;
  completed_count: number;
  failed_count: number;
  remaining_count: number;
  in_flight_count: number;
}

describe.each(ENGINES)('manage_assistant_operation on %s', (engine) => {
  let harness: Harness;
  let tenant: Tenant;

  beforeAll(async () => {
    harness = await startHarness(engine);
    tenant = await harness.newTenant();
  });
  afterAll(async () => {
    await harness.close();
  });

  async function itemRows(operationId: string) {
    return harness.db.query<{ item_id: string; status: string; reason: string | null }>(
      'SELECT item_id, status, reason FROM assistant_operation_item WHERE operation_id = $1 ORDER BY ordinal',
      [operationId],
    );
  }

  it('runs the reference flow: 30 contacts, batches of 5, one failure, complete', async () => {
    const conversation = randomUUID();
    const contacts = ids(30);
    const before = await tenant.context(conversation);
    expect(before.status).toBe(200);
    expect(before.body.text).toBe('');

    const created = await tenant.op(conversation, {
      action: 'create',
      operation_type: 'send_sms',
      total_items: 30,
      item_ids: contacts,
      batch_size: 5,
      query_params: { tag: 'Lead', status: 'active' },
      notes: 'Follow-up campaign for Q2 leads',
    });
    expect(created.status).toBe(200);
    expect(created.body).toMatchObject({
      status: 'active',
      total_items: 30,
      batch_size: 5,
      paused_operation_id: null,
      execution: 'assistant',
    });
    const operationId = created.body.operation_id as string;

    const during = await tenant.context(conversation);
    expect(during.body.text).toContain(
      `- #1 ACTIVE send_sms, 0/30 done, id ${operationId}: progress, do the batch, update.`,
    );
    expect(during.body.text).toContain('Follow-up campaign for Q2 leads');

    const seen: string[] = [];
    for (let round = 0; round < 6; round++) {
      const progress = await tenant.op<Progress>(conversation, { action: 'progress' });
      expect(progress.status).toBe(200);
      expect(progress.body.batch).toEqual(contacts.slice(round * 5, round * 5 + 5));
      expect(progress.body.in_flight_count).toBe(5);
      seen.push(...progress.body.batch);
      const failed = round === 2 ? [{ id: progress.body.batch[1] as string, reason: 'invalid phone number' }] : [];
      const completed = progress.body.batch.filter((id) => !failed.some((f) => f.id === id));
      const update = await tenant.op(conversation, {
        action: 'update',
        operation_id: operationId,
        completed_ids: completed,
        failed,
      });
      expect(update.status).toBe(200);
      expect(update.body).toMatchObject({ in_flight_count: 0, already_recorded: [] });
    }
    expect(seen).toEqual(contacts);

    const last = await tenant.op<Progress>(conversation, { action: 'progress' });
    expect(last.body).toMatchObject({
      batch: [],
      completed_count: 29,
      failed_count: 1,
      remaining_count: 0,
      in_flight_count: 0,
      cursor: 30,
    });

    const mid = await tenant.context(conversation);
    expect(mid.body.text).toContain(`30/30 done (1 failed), id ${operationId}: every item is recorded: complete.`);

    const complete = await tenant.op(conversation, { action: 'complete', operation_id: operationId });
    expect(complete.status).toBe(200);
    expect(complete.body).toMatchObject({
      status: 'completed',
      completed_count: 29,
      failed_count: 1,
      remaining_count: 0,
    });

    const after = await tenant.context(conversation);
    expect(after.body.text).toBe('');
    expect(after.body.operations).toEqual([]);

    const rows = await itemRows(operationId);
    expect(rows.filter((r) => r.status === 'completed')).toHaveLength(29);
    expect(rows.filter((r) => r.status === 'failed')).toEqual([
      { item_id: 'contact-12', status: 'failed', reason: 'invalid phone number' },
    ]);
  });

  it('returns the same batch until it is recorded, and another caller gets the next one', async () => {
    const conversation = randomUUID();
    const created = await tenant.op(conversation, {
      action: 'create',
      operation_type: 'tag_contacts',
      total_items: 12,
      item_ids: ids(12),
      batch_size: 4,
    });
    const operationId = created.body.operation_id as string;
    const first = await tenant.op<Progress>(conversation, { action: 'progress' });
    const again = await tenant.op<Progress>(conversation, { action: 'progress', operation_id: operationId });
    expect(again.body.batch).toEqual(first.body.batch);
    const worker = await tenant.op<Progress>(conversation, { action: 'progress', lease_owner: 'worker-1' });
    expect(worker.body.batch).toEqual(['contact-5', 'contact-6', 'contact-7', 'contact-8']);
    expect(worker.body.in_flight_count).toBe(8);

    // The assistant cannot record items leased to a live worker; the worker can.
    const conflict = await tenant.op(conversation, {
      action: 'update',
      operation_id: operationId,
      completed_ids: ['contact-5'],
    });
    expect(conflict.body).toMatchObject({ completed_count: 0, lease_conflicts: ['contact-5'] });
    const byWorker = await tenant.op(conversation, {
      action: 'update',
      operation_id: operationId,
      completed_ids: worker.body.batch,
      lease_owner: 'worker-1',
    });
    expect(byWorker.body).toMatchObject({ completed_count: 4, in_flight_count: 4 });
  });

  it('puts the items of an expired lease back to pending', async () => {
    const conversation = randomUUID();
    const created = await tenant.op(conversation, {
      action: 'create',
      operation_type: 'enrich',
      total_items: 6,
      item_ids: ids(6),
      batch_size: 3,
    });
    const operationId = created.body.operation_id as string;
    const first = await tenant.op<Progress>(conversation, { action: 'progress', lease_owner: 'crashed-worker' });
    expect(first.body.batch).toEqual(['contact-1', 'contact-2', 'contact-3']);
    // Expire the lease as time would (the clock is the database's; the lease row is the lease).
    await expireLeases(harness.db, operationId);
    const taken = await tenant.op<Progress>(conversation, { action: 'progress', lease_owner: 'rescuer' });
    expect(taken.body.batch).toEqual(['contact-1', 'contact-2', 'contact-3']);
    expect(taken.body.in_flight_count).toBe(3);

    // The crashed worker's late report is refused for items now leased to the rescuer.
    const late = await tenant.op(conversation, {
      action: 'update',
      operation_id: operationId,
      failed: [{ id: 'contact-1', reason: 'late' }],
      lease_owner: 'crashed-worker',
    });
    expect(late.body).toMatchObject({ failed_count: 0, lease_conflicts: ['contact-1'] });

    const events = await harness.db.query<{ kind: string }>(
      'SELECT kind FROM operation_event WHERE operation_id = $1 ORDER BY id',
      [operationId],
    );
    expect(events.map((e) => e.kind)).toEqual(['created', 'batch_leased', 'lease_expired', 'batch_leased']);
  });

  it('is idempotent: an item recorded twice counts once', async () => {
    const conversation = randomUUID();
    const created = await tenant.op(conversation, {
      action: 'create',
      operation_type: 'send_email',
      total_items: 5,
      item_ids: ids(5),
    });
    const operationId = created.body.operation_id as string;
    const update = { action: 'update', operation_id: operationId, completed_ids: ['contact-1', 'contact-2'] };
    const first = await tenant.op(conversation, update);
    const replay = await tenant.op(conversation, { ...update, failed: [{ id: 'contact-3', reason: 'bounced' }] });
    expect(first.body).toMatchObject({ completed_count: 2, already_recorded: [] });
    expect(replay.body).toMatchObject({ completed_count: 2, failed_count: 1, remaining_count: 2 });
    expect([...(replay.body.already_recorded as string[])].sort()).toEqual(['contact-1', 'contact-2']);
  });

  it('auto-pauses the active operation on create and on resume', async () => {
    const conversation = randomUUID();
    const a = await tenant.op(conversation, {
      action: 'create',
      operation_type: 'a',
      total_items: 2,
      item_ids: ids(2),
    });
    const b = await tenant.op(conversation, {
      action: 'create',
      operation_type: 'b',
      total_items: 2,
      item_ids: ids(2),
    });
    expect(b.body.paused_operation_id).toBe(a.body.operation_id);

    const progress = await tenant.op<Progress>(conversation, { action: 'progress' });
    expect(progress.body.operation_id).toBe(b.body.operation_id);

    const pausedA = await tenant.op<Progress>(conversation, { action: 'progress', operation_id: a.body.operation_id });
    expect(pausedA.body).toMatchObject({ status: 'paused', batch: [] });

    const context = await tenant.context(conversation);
    expect(context.body.text).toMatch(/ACTIVE b[\s\S]*PAUSED a/);
    expect(context.body.text).toContain(`id ${a.body.operation_id}: paused by a newer operation; resume to continue.`);

    const resumed = await tenant.op(conversation, { action: 'resume', operation_id: a.body.operation_id });
    expect(resumed.body).toMatchObject({ status: 'active', paused_operation_id: b.body.operation_id });
    const statuses = await harness.db.query<{ id: string; status: string }>(
      'SELECT id, status FROM assistant_operation WHERE conversation_id = $1',
      [conversation],
    );
    expect(Object.fromEntries(statuses.map((s) => [s.id, s.status]))).toEqual({
      [a.body.operation_id as string]: 'active',
      [b.body.operation_id as string]: 'paused',
    });
  });

  it('leaves exactly one active operation when creates race in one conversation', async () => {
    const conversation = randomUUID();
    const results = await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        tenant.op(conversation, { action: 'create', operation_type: `race_${i}`, total_items: 3, item_ids: ids(3) }),
      ),
    );
    expect(results.map((r) => r.status)).toEqual([200, 200, 200, 200, 200, 200]);
    const rows = await harness.db.query<{ status: string }>(
      'SELECT status FROM assistant_operation WHERE conversation_id = $1',
      [conversation],
    );
    expect(rows.filter((r) => r.status === 'active')).toHaveLength(1);
    expect(rows.filter((r) => r.status === 'paused')).toHaveLength(5);
  });

  it('cancels: every item not recorded is abandoned, and a late update is refused', async () => {
    const conversation = randomUUID();
    const created = await tenant.op(conversation, {
      action: 'create',
      operation_type: 'send_sms',
      total_items: 10,
      item_ids: ids(10),
      batch_size: 3,
    });
    const operationId = created.body.operation_id as string;
    const batch = await tenant.op<Progress>(conversation, { action: 'progress' });
    await tenant.op(conversation, {
      action: 'update',
      operation_id: operationId,
      completed_ids: batch.body.batch.slice(0, 2),
      failed: [{ id: batch.body.batch[2], reason: 'opted out' }],
    });
    await tenant.op(conversation, { action: 'progress' }); // 3 items in flight

    const cancelled = await tenant.op(conversation, { action: 'cancel', operation_id: operationId });
    expect(cancelled.status).toBe(200);
    expect(cancelled.body).toMatchObject({
      status: 'cancelled',
      completed_count: 2,
      failed_count: 1,
      abandoned_count: 7,
    });
    const rows = await itemRows(operationId);
    expect(rows.filter((r) => r.status === 'abandoned')).toHaveLength(7);

    const late = await tenant.op(conversation, {
      action: 'update',
      operation_id: operationId,
      completed_ids: ['contact-4'],
    });
    expect(late.status).toBe(409);
    expect(late.body).toMatchObject({ error: { code: 'operation_finished' } });
    expect((await itemRows(operationId)).find((r) => r.item_id === 'contact-4')?.status).toBe('abandoned');
    expect((await tenant.context(conversation)).body.text).toBe('');
  });

  it('refuses to complete while items remain, unless forced', async () => {
    const conversation = randomUUID();
    const created = await tenant.op(conversation, {
      action: 'create',
      operation_type: 'x',
      total_items: 4,
      item_ids: ids(4),
    });
    const operationId = created.body.operation_id as string;
    await tenant.op(conversation, { action: 'update', operation_id: operationId, completed_ids: ['contact-1'] });
    const refused = await tenant.op(conversation, { action: 'complete', operation_id: operationId });
    expect(refused.status).toBe(409);
    expect(refused.body).toMatchObject({ error: { code: 'items_remaining', details: { remaining_count: 3 } } });
    const forced = await tenant.op(conversation, { action: 'complete', operation_id: operationId, force: true });
    expect(forced.body).toMatchObject({
      status: 'completed',
      completed_count: 1,
      abandoned_count: 3,
      remaining_count: 0,
    });
  });

  it('pauses, gets a page of failures, and retries the failed items as a new operation', async () => {
    const conversation = randomUUID();
    const created = await tenant.op(conversation, {
      action: 'create',
      operation_type: 'send_sms',
      total_items: 8,
      item_ids: ids(8),
      query_params: { tag: 'Lead' },
    });
    const operationId = created.body.operation_id as string;
    await tenant.op(conversation, {
      action: 'update',
      operation_id: operationId,
      completed_ids: ['contact-1', 'contact-2'],
      failed: ['contact-3', 'contact-5', 'contact-8'].map((id) => ({ id, reason: `no phone for ${id}` })),
    });
    const paused = await tenant.op(conversation, { action: 'pause' });
    expect(paused.body).toMatchObject({ operation_id: operationId, status: 'paused' });

    const page1 = await tenant.op(conversation, { action: 'get', operation_id: operationId, failures_limit: 2 });
    expect(page1.body).toMatchObject({
      operation_id: operationId,
      status: 'paused',
      operation_type: 'send_sms',
      total_items: 8,
      batch_size: 5,
      completed_count: 2,
      failed_count: 3,
      remaining_count: 3,
      in_flight_count: 0,
      failures: [
        { id: 'contact-3', reason: 'no phone for contact-3' },
        { id: 'contact-5', reason: 'no phone for contact-5' },
      ],
    });
    const page2 = await tenant.op(conversation, {
      action: 'get',
      operation_id: operationId,
      failures_cursor: page1.body.next_failures_cursor,
    });
    expect(page2.body).toMatchObject({ failures: [{ id: 'contact-8' }], next_failures_cursor: null });

    const retry = await tenant.op(conversation, { action: 'retry_failed', operation_id: operationId });
    expect(retry.body).toMatchObject({
      status: 'active',
      total_items: 3,
      retry_of: operationId,
      operation_type: 'send_sms',
    });
    const batch = await tenant.op<Progress>(conversation, { action: 'progress' });
    expect(batch.body.batch).toEqual(['contact-3', 'contact-5', 'contact-8']);
    const retried = await tenant.op(conversation, { action: 'get', operation_id: retry.body.operation_id });
    expect(retried.body).toMatchObject({ query_params: { tag: 'Lead' }, retry_of: operationId });
  });
});
