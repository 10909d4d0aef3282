/**
 * Database facts that hold whatever the application does: migrations build the schema on an
 * empty database, one active operation per conversation is enforced by a unique index, and
 * deleting an organization removes everything it owned, items included.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  completeIfDone,
  createApiKey,
  createOperation,
  type OpspadDatabase,
  pauseOperation,
  recordResults,
  resumeOperation,
  runMigrations,
} from '../../src/store/index.ts';
import { counting, ENGINES, ids, openTestDatabase } from '../helpers/harness.ts';

describe.each(ENGINES)('the store on %s', (engine) => {
  let db: OpspadDatabase;

  beforeAll(async () => {
    db = await openTestDatabase(engine);
  });
  afterAll(async () => {
    await db.close();
  });

  async function newOperation() {
    const { organization_id } = await createApiKey(db, `org-${randomUUID()}`);
    const scope = { organizationId: organization_id, conversationId: randomUUID() };
    const { operation } = await createOperation(db, scope, {
      operationType: 'send_sms',
      itemIds: ids(25),
      batchSize: 5,
      queryParams: null,
      notes: null,
      execution: 'assistant',
      actor: 'test',
    });
    return { scope, operation };
  }

  it('has applied every migration, and applying them again changes nothing', async () => {
    await runMigrations(db);
    const tables = await db.query<{ table_name: string }>(
      `SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY table_name`,
    );
    expect(tables.map((t) => t.table_name)).toEqual([
      'api_key',
      'assistant_conversation',
      'assistant_execution',
      'assistant_operation',
      'assistant_operation_item',
      'assistant_operation_kept_failure',
      'assistant_operation_lease',
      'context_render',
      'mcp_session',
      'oauth_client',
      'oauth_code',
      'oauth_grant',
      'oauth_token',
      'operation_event',
      'operation_throttle',
      'operator_bulk_action',
      'operator_bulk_action_target',
      'organization',
      'organization_key_limit',
      'organization_quota',
      'organization_webhook_secret',
      'retention_watermark',
      'scratchpad',
      'scratchpad_event',
      'scratchpad_note',
      'scratchpad_trace',
      'scratchpad_version',
    ]);
    const indexes = await db.query<{ indexname: string; indexdef: string }>(
      `SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'assistant_operation' ORDER BY indexname`,
    );
    const byName = Object.fromEntries(indexes.map((i) => [i.indexname, i.indexdef]));
    expect(byName.idx_assistant_operation_conversation).toMatch(/btree \(conversation_id\)$/);
    expect(byName.idx_assistant_operation_org_active).toMatch(
      /btree \(organization_id, status\) WHERE \(\(status\)::text = 'active'::text\)/,
    );
    expect(byName.idx_assistant_operation_org_open).toMatch(/btree \(organization_id\) WHERE \(\(status\)::text = ANY/);
    expect(byName.uq_assistant_operation_one_active).toMatch(
      /UNIQUE INDEX .* btree \(conversation_id, organization_id\) WHERE \(\(status\)::text = 'active'/,
    );
  });

  it('refuses a second active operation in a conversation at the database level', async () => {
    const { scope, operation } = await newOperation();
    await expect(
      db.query(
        `INSERT INTO assistant_operation (conversation_id, organization_id, operation_type, status, total_items)
         VALUES ($1, $2, 'other', 'active', 1)`,
        [scope.conversationId, scope.organizationId],
      ),
    ).rejects.toThrow(/uq_assistant_operation_one_active/);
    const rows = await db.query('SELECT id FROM assistant_operation WHERE conversation_id = $1', [
      scope.conversationId,
    ]);
    expect(rows).toEqual([{ id: operation.id }]);
  });

  it('deletes operations, items and events with their organization', async () => {
    const { scope, operation } = await newOperation();
    const count = async () =>
      (
        await db.query<{ n: number }>(
          'SELECT count(*)::int AS n FROM assistant_operation_item WHERE operation_id = $1',
          [operation.id],
        )
      )[0]?.n;
    expect(await count()).toBe(25);
    await db.query('DELETE FROM organization WHERE id = $1', [scope.organizationId]);
    expect(await count()).toBe(0);
    const left = await db.query('SELECT 1 FROM operation_event WHERE operation_id = $1', [operation.id]);
    expect(left).toEqual([]);
  });

  it("creates an assistant's operation in one statement, pausing the active one, and a large one by COPY", async () => {
    const { organization_id } = await createApiKey(db, `org-${randomUUID()}`);
    const scope = { organizationId: organization_id, conversationId: randomUUID() };
    const params = (itemIds: string[]) => ({
      operationType: 'send_sms',
      itemIds,
      batchSize: 5,
      queryParams: null,
      notes: null,
      execution: 'assistant' as const,
      actor: 'test',
    });
    const { db: counted, statements } = counting(db);
    // One call: the conversation's lock, the quota, the pause and the rows (opspad_create_operation).
    const first = await createOperation(counted, scope, params(ids(30)));
    expect(statements()).toBe(1);
    const second = await createOperation(counted, scope, params(ids(30)));
    expect(statements()).toBe(2);
    expect(second.pausedOperationId).toBe(first.operation.id);

    const large = await createOperation(db, scope, params(ids(1_500)));
    expect(large.pausedOperationId).toBe(second.operation.id);
    // Time-ordered ids (version 7) on both paths: a new operation's keys sort after the older ones'.
    for (const { operation } of [first, second, large]) {
      expect(operation.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    }
    expect(large.operation.id.slice(0, 13) >= first.operation.id.slice(0, 13)).toBe(true);
    const statuses = await db.query<{ id: string; status: string; items: number }>(
      `SELECT o.id, o.status, (SELECT count(*)::int FROM assistant_operation_item i WHERE i.operation_id = o.id) AS items
       FROM assistant_operation o WHERE o.organization_id = $1 ORDER BY o.created_at`,
      [organization_id],
    );
    expect(statuses).toEqual([
      { id: first.operation.id, status: 'paused', items: 30 },
      { id: second.operation.id, status: 'paused', items: 30 },
      { id: large.operation.id, status: 'active', items: 1_500 },
    ]);
    const events = await db.query<{ operation_id: string; kind: string; data: Record<string, unknown> }>(
      'SELECT operation_id, kind, data FROM operation_event WHERE organization_id = $1 ORDER BY id',
      [organization_id],
    );
    expect(events).toEqual(
      expect.arrayContaining([
        {
          operation_id: first.operation.id,
          kind: 'created',
          data: { total_items: 30, batch_size: 5, execution: 'assistant' },
        },
        { operation_id: first.operation.id, kind: 'paused', data: { reason: 'a new operation was created' } },
        { operation_id: second.operation.id, kind: 'paused', data: { reason: 'a new operation was created' } },
      ]),
    );
    expect(events).toHaveLength(5);
  });

  it('checks quotas and limits set past the range of a 32-bit integer', async () => {
    const { organization_id } = await createApiKey(db, `org-${randomUUID()}`);
    const scope = { organizationId: organization_id, conversationId: randomUUID() };
    const { operation } = await createOperation(db, scope, {
      operationType: 'send_sms',
      itemIds: ids(3),
      batchSize: 5,
      queryParams: null,
      notes: null,
      execution: 'background',
      queuePrefix: 'opspad',
      quota: { maxStoredItems: 2 ** 40, maxOpenOperations: 2 ** 33 },
      maxActiveBackground: 2 ** 33,
      actor: 'test',
    });
    expect(operation).toMatchObject({ status: 'active', total_items: 3 });
  });

  it('admits concurrent creates of one organization up to its quota and background limit, never past', async () => {
    const { organization_id } = await createApiKey(db, `org-${randomUUID()}`);
    const create = (execution: 'assistant' | 'background', limits: { open: number; background: number }) =>
      createOperation(
        db,
        { organizationId: organization_id, conversationId: randomUUID() },
        {
          operationType: 'send_sms',
          itemIds: ids(4),
          batchSize: 5,
          queryParams: null,
          notes: null,
          execution,
          queuePrefix: 'opspad',
          quota: { maxStoredItems: 1_000_000, maxOpenOperations: limits.open },
          maxActiveBackground: limits.background,
          actor: 'test',
        },
      ).then(
        () => 'created',
        (error: { code?: string }) => error.code,
      );
    // Each waits for the one before it at the organization's quota row, then counts what committed.
    const background = await Promise.all(
      Array.from({ length: 10 }, () => create('background', { open: 100, background: 3 })),
    );
    expect(background.filter((outcome) => outcome === 'created')).toHaveLength(3);
    expect(background.filter((outcome) => outcome === 'too_many_active_operations')).toHaveLength(7);
    const open = await Promise.all(Array.from({ length: 10 }, () => create('assistant', { open: 8, background: 3 })));
    expect(open.filter((outcome) => outcome === 'created')).toHaveLength(5);
    expect(open.filter((outcome) => outcome === 'quota_exceeded')).toHaveLength(5);
    const [quota] = await db.query<{ stored_items: string }>(
      'SELECT stored_items::text FROM organization_quota WHERE organization_id = $1',
      [organization_id],
    );
    expect(quota?.stored_items).toBe(String(8 * 4)); // the refused reserved nothing
  });

  it('rolls back every row of a create that fails halfway', async () => {
    const { organization_id } = await createApiKey(db, `org-${randomUUID()}`);
    const scope = { organizationId: organization_id, conversationId: randomUUID() };
    // Duplicate ids get past no caller of the tool, but the unique index still stops them here.
    await expect(
      createOperation(db, scope, {
        operationType: 'x',
        itemIds: ['a', 'b', 'a'],
        batchSize: 5,
        queryParams: null,
        notes: null,
        execution: 'assistant',
        actor: 'test',
      }),
    ).rejects.toThrow();
    const rows = await db.query('SELECT 1 FROM assistant_operation WHERE organization_id = $1', [organization_id]);
    expect(rows).toEqual([]);
  });

  it('completes an operation with nothing left only while it is active: a pause that landed first wins', async () => {
    const { scope, operation } = await newOperation();
    await recordResults(db, scope, { operationId: operation.id, completedIds: ids(25), failed: [], owner: 'test' });
    await pauseOperation(db, scope, operation.id, {
      actor: 'operator:ops',
      reason: 'operator',
      pausedBy: 'operator:ops',
    });
    expect(await completeIfDone(db, scope, operation.id, 'worker')).toBe(false);
    const [paused] = await db.query<{ status: string }>('SELECT status FROM assistant_operation WHERE id = $1', [
      operation.id,
    ]);
    expect(paused?.status).toBe('paused');
    await resumeOperation(db, scope, operation.id, { actor: 'test' });
    // Another organization's call, or one naming another conversation, completes nothing.
    const foreign = { organizationId: randomUUID(), conversationId: scope.conversationId };
    expect(await completeIfDone(db, foreign, operation.id, 'worker')).toBe(false);
    expect(await completeIfDone(db, { ...scope, conversationId: randomUUID() }, operation.id, 'worker')).toBe(false);
    expect(await completeIfDone(db, scope, operation.id, 'worker')).toBe(true);
    const [done] = await db.query<{ status: string }>('SELECT status FROM assistant_operation WHERE id = $1', [
      operation.id,
    ]);
    expect(done?.status).toBe('completed');
    const events = await db.query<{ kind: string; actor: string; data: unknown }>(
      `SELECT kind, actor, data FROM operation_event WHERE operation_id = $1 AND kind = 'completed'`,
      [operation.id],
    );
    expect(events).toEqual([{ kind: 'completed', actor: 'worker', data: { forced: false, abandoned: 0 } }]);
    // Completed already: a second call (another lane, the reconciler) changes nothing.
    expect(await completeIfDone(db, scope, operation.id, 'reconciler')).toBe(false);
  });
});
