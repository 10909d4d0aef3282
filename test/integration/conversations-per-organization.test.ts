/**
 * A conversation is (organization, id), on real Postgres and on PGlite. The same id used by two
 * organizations is two conversations that never meet: another organization's id answers exactly
 * as an id nobody used (no existence oracle), and using it gives the caller a conversation of its
 * own (nothing to squat), while the first organization's data stays as it was.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { organizationDigest } from '../helpers/digest.ts';
import { ENGINES, type Harness, ids, startHarness, type Tenant } from '../helpers/harness.ts';

describe.each(ENGINES)('conversations per organization on %s', (engine) => {
  let harness: Harness;
  let orgA: Tenant;
  let orgB: Tenant;
  /** A's conversation: an active operation with a batch in flight, a pad, persistent notes. */
  let conversation: string;
  let operationA: string;
  let contextA: string;

  beforeAll(async () => {
    harness = await startHarness(engine);
    orgA = await harness.newTenant();
    orgB = await harness.newTenant();
    conversation = randomUUID();
    const created = await orgA.op(conversation, {
      action: 'create',
      operation_type: 'secret_sms',
      total_items: 4,
      item_ids: ids(4, 'a-lead'),
      batch_size: 2,
    });
    expect(created.status).toBe(200);
    operationA = created.body.operation_id as string;
    expect((await orgA.op(conversation, { action: 'progress' })).body.batch).toEqual(['a-lead-1', 'a-lead-2']);
    const pad = await orgA.tool(conversation, { task: 'A secret task' }, 'update_scratchpad');
    expect(pad.status).toBe(200);
    await orgA.tool(conversation, { persistent_notes: 'A standing note' }, 'read_from_scratchpad');
    contextA = (await orgA.context(conversation)).body.text;
    expect(contextA).toContain(operationA);
  });
  afterAll(async () => {
    await harness?.close();
  });

  it("answers B's reads of A's conversation id exactly as reads of an id nobody used", async () => {
    const unused = randomUUID();
    const before = await organizationDigest(harness.db, orgA.organizationId);
    for (const suffix of [
      '/context',
      '/scratchpad',
      '/scratchpad/versions',
      '/scratchpad/events',
      '/context-renders',
    ]) {
      const used = await orgB.get(`/v1/conversations/${conversation}${suffix}`);
      const fresh = await orgB.get(`/v1/conversations/${unused}${suffix}`);
      expect(used.status, suffix).toBe(200);
      expect(used, suffix).toEqual(fresh);
      expect(JSON.stringify(used.body), suffix).not.toMatch(/secret|standing|a-lead/i);
    }
    const get = await orgB.op(conversation, { action: 'get' });
    expect(get).toEqual(await orgB.op(unused, { action: 'get' }));
    expect(get.status).toBe(404);
    expect((get.body as { error: { code: string } }).error.code).toBe('no_active_operation');
    // Reading creates nothing, for either organization.
    expect(await organizationDigest(harness.db, orgA.organizationId)).toEqual(before);
    const rows = await harness.db.query('SELECT 1 FROM assistant_conversation WHERE organization_id = $1', [
      orgB.organizationId,
    ]);
    expect(rows).toEqual([]);
  });

  it("gives B a conversation of its own under A's id, and leaves A's as it was", async () => {
    const before = await organizationDigest(harness.db, orgA.organizationId);
    const created = await orgB.op(conversation, {
      action: 'create',
      operation_type: 'b_work',
      total_items: 3,
      item_ids: ids(3, 'b-lead'),
      batch_size: 2,
    });
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    // A's active operation is not B's to pause: each conversation has its own.
    expect(created.body.paused_operation_id ?? null).toBeNull();
    expect((await orgB.op(conversation, { action: 'progress' })).body).toMatchObject({
      operation_id: created.body.operation_id,
      batch: ['b-lead-1', 'b-lead-2'],
    });
    const pad = await orgB.tool<{ version: number }>(conversation, { task: 'B task' }, 'update_scratchpad');
    expect(pad.body.version).toBe(1);
    const notes = await orgB.tool<{ result: string }>(
      conversation,
      { persistent_notes: 'B standing note' },
      'read_from_scratchpad',
    );
    expect(notes.body.result).toBe('Notes from scratchpad:\n- B standing note');
    const execution = await orgB.post(`/v1/conversations/${conversation}/executions`);
    expect(execution.status).toBe(201);

    const contextB = (await orgB.context(conversation)).body.text;
    expect(contextB).toContain(created.body.operation_id as string);
    expect(contextB).toContain('B task');
    expect(contextB).not.toMatch(/secret|a-lead/i);

    // A: not one row changed, and its context, batch and notes are as they were.
    expect(await organizationDigest(harness.db, orgA.organizationId)).toEqual(before);
    expect((await orgA.context(conversation)).body.text).toBe(contextA);
    expect((await orgA.op(conversation, { action: 'progress' })).body.batch).toEqual(['a-lead-1', 'a-lead-2']);
    const notesA = await orgA.tool<{ result: string }>(conversation, {}, 'read_from_scratchpad');
    expect(notesA.body.result).toBe('Notes from scratchpad:\n- A standing note');
    const active = await harness.db.query<{ organization_id: string }>(
      `SELECT organization_id FROM assistant_operation WHERE conversation_id = $1 AND status = 'active'
       ORDER BY organization_id`,
      [conversation],
    );
    expect(active.map((r) => r.organization_id)).toEqual([orgA.organizationId, orgB.organizationId].sort());
  });

  it('lets nobody squat an id: the one who uses it second still gets a conversation of its own', async () => {
    const predictable = randomUUID();
    // B claims the id first, with everything a conversation can hold.
    await orgB.op(predictable, { action: 'create', operation_type: 'squat', total_items: 1, item_ids: ['s-1'] });
    await orgB.tool(predictable, { task: 'squatter' }, 'update_scratchpad');
    const created = await orgA.op(predictable, {
      action: 'create',
      operation_type: 'mine',
      total_items: 1,
      item_ids: ['m-1'],
    });
    expect(created.status).toBe(200);
    const pad = await orgA.tool<{ version: number }>(predictable, { task: 'rightful' }, 'update_scratchpad');
    expect(pad.body.version).toBe(1);
    const context = (await orgA.context(predictable)).body.text;
    expect(context).toContain('rightful');
    expect(context).not.toContain('squat');
  });

  it("queues each organization's reorganization of the same conversation id as its own job", async () => {
    const shared = randomUUID();
    for (const tenant of [orgA, orgB]) {
      for (let i = 0; i < 3; i++) {
        const write = await tenant.tool<{ reorganization_queued: boolean }>(
          shared,
          { add: { goals: [{ text: `goal ${i}` }] } },
          'update_scratchpad',
        );
        expect(write.body.reorganization_queued).toBe(i === 2);
      }
    }
    const queue = harness.service.reorganizeQueue.queue;
    for (const tenant of [orgA, orgB]) {
      const job = await queue.getJob(`pad.${tenant.organizationId}.${shared}.3`);
      expect(job?.data, tenant.organizationId).toMatchObject({
        organization_id: tenant.organizationId,
        conversation_id: shared,
      });
    }
  });
});
