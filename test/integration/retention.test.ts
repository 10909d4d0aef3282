/**
 * Retention, end to end on a database of this file's own (retention is global: on the run's
 * shared database it would act on other files' rows, and theirs on ours). Time is moved by
 * backdating rows (an operation's finish, an execution's end, a render's creation), never by
 * waiting; a pass is run with the reconciler's `runOnce`, the way the schedule runs it.
 *
 * What must hold: an old finished operation loses its item rows but keeps its row, counts and
 * first failures, and every answer about it stays true (and says "items pruned" where it shows
 * item-level data); live operations lose nothing, however old; each other kind of row follows
 * its own limit, the newest kept; the work is done in bounded steps that resume where they
 * stopped.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GetResult } from '../../src/domain/operation-output.ts';
import type { ReconcileReport } from '../../src/queue/reconciler.ts';
import { createBulkAction, getBulkAction } from '../../src/store/index.ts';
import { ENGINES, type Engine, type Harness, ids, startHarness, type Tenant } from '../helpers/harness.ts';
import { type PrivateDatabase, privatePostgresDatabase } from '../helpers/private-database.ts';

/** Short limits, so a few hundred rows take several steps. */
const RETENTION_ENV = {
  OPSPAD_RETENTION: '1h',
  OPSPAD_RETENTION_FAILURES: '3',
  OPSPAD_RETENTION_PAD_VERSIONS: '3',
  OPSPAD_RETENTION_BATCH: '50',
  OPSPAD_RECONCILE_INTERVAL: '1h',
};

interface OperationRow {
  status: string;
  total_items: number;
  completed_count: number;
  failed_count: number;
}

async function startRetentionHarness(engine: Engine, database?: PrivateDatabase): Promise<Harness> {
  return startHarness(engine, {
    ...(database ? { databaseUrl: database.url } : {}),
    workers: true,
    env: RETENTION_ENV,
  });
}

/** Helpers over one harness and tenant. */
function helpers(harness: Harness, tenant: Tenant) {
  const db = harness.db;
  return {
    /** An assistant operation in a conversation of its own, `failing` ids failed with their reasons. */
    async finished(
      count: number,
      failing: Record<string, string> = {},
      end: 'complete' | 'cancel' | 'none' = 'complete',
    ): Promise<{ conversation: string; operationId: string; itemIds: string[] }> {
      const conversation = randomUUID();
      const itemIds = ids(count);
      const created = await tenant.op(conversation, {
        action: 'create',
        operation_type: 'manual',
        total_items: count,
        item_ids: itemIds,
        batch_size: 10,
      });
      expect(created.status, JSON.stringify(created.body)).toBe(200);
      const operationId = created.body.operation_id as string;
      if (end !== 'none') {
        const recorded = end === 'cancel' ? itemIds.slice(0, 5) : itemIds;
        const update = await tenant.op(conversation, {
          action: 'update',
          operation_id: operationId,
          completed_ids: recorded.filter((id) => failing[id] === undefined),
          failed: Object.entries(failing).map(([id, reason]) => ({ id, reason })),
        });
        expect(update.status, JSON.stringify(update.body)).toBe(200);
        const ended = await tenant.op(conversation, { action: end, operation_id: operationId });
        expect(ended.status, JSON.stringify(ended.body)).toBe(200);
      }
      return { conversation, operationId, itemIds };
    },
    /** Moves an operation's last change (its finish, for a finished one) `hours` back. */
    async backdate(operationId: string, hours = 2): Promise<void> {
      await db.query(`UPDATE assistant_operation SET updated_at = now() - make_interval(hours => $2) WHERE id = $1`, [
        operationId,
        hours,
      ]);
    },
    async itemRows(operationId: string): Promise<{ item_id: string; status: string; reason: string | null }[]> {
      return db.query(
        'SELECT item_id, status, reason FROM assistant_operation_item WHERE operation_id = $1 ORDER BY ordinal',
        [operationId],
      );
    },
    /** The failures retention kept, moved out of the item table. */
    async keptFailures(operationId: string): Promise<{ item_id: string; reason: string }[]> {
      return db.query(
        'SELECT item_id, reason FROM assistant_operation_kept_failure WHERE operation_id = $1 ORDER BY ordinal',
        [operationId],
      );
    },
    async operationRow(operationId: string): Promise<OperationRow | undefined> {
      const rows = await db.query<OperationRow>(
        'SELECT status, total_items, completed_count, failed_count FROM assistant_operation WHERE id = $1',
        [operationId],
      );
      return rows[0];
    },
    async eventKinds(operationId: string): Promise<string[]> {
      const rows = await db.query<{ kind: string }>(
        'SELECT kind FROM operation_event WHERE operation_id = $1 ORDER BY id',
        [operationId],
      );
      return rows.map((r) => r.kind);
    },
    async pass(): Promise<NonNullable<ReconcileReport['retention']>> {
      const report = await harness.service.reconciler?.runOnce();
      expect(report?.retention, 'the pass ran retention').toBeDefined();
      return report?.retention as NonNullable<ReconcileReport['retention']>;
    },
  };
}

describe.each(ENGINES)('retention of finished operations (%s)', (engine) => {
  let harness: Harness;
  let tenant: Tenant;
  let h: ReturnType<typeof helpers>;
  let database: PrivateDatabase | undefined;

  beforeAll(async () => {
    database = engine === 'postgres' ? await privatePostgresDatabase('retention') : undefined;
    harness = await startRetentionHarness(engine, database);
    tenant = await harness.newTenant();
    h = helpers(harness, tenant);
  });
  afterAll(async () => {
    await harness?.close();
    await database?.drop();
  });

  it('deletes an old finished operation’s item rows in steps; its row, counts, first failures and answers stay', async () => {
    // 200 items: 190 completed, 10 failed with two reasons, spread through the operation.
    const failing = Object.fromEntries(
      [3, 20, 41, 60, 77, 99, 120, 150, 170, 199].map((n, i) => [
        `contact-${n}`,
        i % 3 === 2 ? 'opted out' : 'no phone',
      ]),
    );
    const old = await h.finished(200, failing);
    // A fact citing a completed item of it: the pad must stay writable once the item is gone.
    const pad = await tenant.tool(
      old.conversation,
      {
        add: {
          facts: [{ text: 'contact-5 asked for Tuesdays', source_ref: `item:${old.operationId}:contact-5` }],
          refs: [{ id: `item:${old.operationId}:contact-5`, kind: 'item' }],
        },
      },
      'update_scratchpad',
    );
    expect(pad.status, JSON.stringify(pad.body)).toBe(200);
    const cancelled = await h.finished(60, {}, 'cancel'); // 5 completed, 55 abandoned
    const recent = await h.finished(20, { 'contact-1': 'no phone' }); // finished just now: kept
    const fewFailures = await h.finished(10, { 'contact-2': 'bounced', 'contact-9': 'bounced' });
    for (const op of [old, cancelled, fewFailures]) {
      await h.backdate(op.operationId);
    }
    const before = await h.operationRow(old.operationId);

    const report = await h.pass();

    // 197 of the old one (3 failures kept), all 60 of the cancelled one, 8 of the one with 2
    // failures; at 50 rows a statement, that is several steps.
    expect(report.pruned.assistant_operation_item).toBe(197 + 60 + 8);
    expect(report.steps).toBeGreaterThanOrEqual(4 + 2 + 1);
    expect(report.operations).toBe(3);
    expect(report.caughtUp).toBe(true);

    expect(await h.operationRow(old.operationId)).toEqual(before);
    // No row of a pruned operation is left in the item table (none pins its index pages): the
    // kept failures moved to a table of their own.
    for (const op of [old, cancelled, fewFailures]) {
      expect(await h.itemRows(op.operationId)).toEqual([]);
    }
    expect(await h.keptFailures(old.operationId)).toEqual([
      { item_id: 'contact-3', reason: 'no phone' },
      { item_id: 'contact-20', reason: 'no phone' },
      { item_id: 'contact-41', reason: 'opted out' },
    ]);
    expect(await h.keptFailures(cancelled.operationId)).toEqual([]);
    expect(await h.itemRows(recent.operationId)).toHaveLength(20);
    expect(await h.keptFailures(recent.operationId)).toEqual([]);
    expect(await h.keptFailures(fewFailures.operationId)).toEqual([
      { item_id: 'contact-2', reason: 'bounced' },
      { item_id: 'contact-9', reason: 'bounced' },
    ]);

    // get: exact counts, the failures kept, the others counted by reason, and "items pruned".
    const got = await tenant.op(old.conversation, { action: 'get', operation_id: old.operationId });
    expect(got.status).toBe(200);
    expect(got.body).toMatchObject({
      status: 'completed',
      total_items: 200,
      completed_count: 190,
      failed_count: 10,
      remaining_count: 0,
      in_flight_count: 0,
      failures: [
        { id: 'contact-3', reason: 'no phone' },
        { id: 'contact-20', reason: 'no phone' },
        { id: 'contact-41', reason: 'opted out' },
      ],
      next_failures_cursor: null,
      items_pruned: {
        failures_kept: 3,
        failures_pruned: 7,
        pruned_failure_reasons: [
          { reason: 'no phone', count: 5 },
          { reason: 'opted out', count: 2 },
        ],
        other_pruned_failures: 0,
      },
    });
    expect(Date.parse((got.body.items_pruned as { at: string }).at)).not.toBeNaN();
    // The answer is what the published schema (OpenAPI, the client's types) says.
    expect(GetResult.safeParse(got.body).error).toBeUndefined();
    // An operation finished a moment ago says nothing of the kind.
    const recentGot = await tenant.op(recent.conversation, { action: 'get', operation_id: recent.operationId });
    expect(recentGot.body).not.toHaveProperty('items_pruned');

    // The operator view's page says the rows are gone and counts the deleted failures by reason.
    const adminPage = async (operationId: string) => {
      const response = await fetch(`${harness.url}/admin/operations/${operationId}`, {
        headers: { authorization: harness.adminAuthorization },
      });
      expect(response.status).toBe(200);
      return response.text();
    };
    const oldPage = await adminPage(old.operationId);
    expect(oldPage).toContain('<h2 id="pruned">Items pruned</h2>');
    expect(oldPage).toMatch(/3 failure\(s\) kept below, 7 deleted, by reason:/);
    expect(oldPage).toMatch(/no phone<\/td><td class="group-count">5</);
    expect(oldPage).toMatch(/opted out<\/td><td class="group-count">2</);
    expect(await adminPage(recent.operationId)).not.toContain('Items pruned');
    // The kept failures, read from their own table: grouped with examples, found by item id
    // (detail and search).
    expect(oldPage).toMatch(
      /no phone<\/td><td class="group-count">2<\/td><td><a class="id" href="[^"]+\?item=contact-3">/,
    );
    expect(await adminPage(`${old.operationId}?item=contact-20`)).toMatch(
      /<td class="id">contact-20<\/td><td>#\d+<\/td><td>failed<\/td><td>\d+<\/td><td class="reason">no phone<\/td>/,
    );
    const found = await fetch(`${harness.url}/admin/operations?q=contact-41`, {
      headers: { authorization: harness.adminAuthorization },
    });
    expect(await found.text()).toContain(`data-operation-id="${old.operationId}"`);

    // progress: the counts, no batch, and why there is no item-level data.
    const progress = await tenant.op(old.conversation, { action: 'progress', operation_id: old.operationId });
    expect(progress.body).toMatchObject({ batch: [], completed_count: 190, failed_count: 10, remaining_count: 0 });
    expect(progress.body.next).toMatch(/^The operation is completed\. Items pruned:/);
    const status = await tenant.get(`/v1/operations/${old.operationId}`);
    expect(status.body).toMatchObject({ status: 'completed', completed_count: 190, failed_count: 10 });

    // A retry of the failures would miss the 7 deleted: refused, saying so. With every failure
    // kept, a retry is whole.
    const retry = await tenant.op(old.conversation, { action: 'retry_failed', operation_id: old.operationId });
    expect(retry.status).toBe(409);
    expect(retry.body).toMatchObject({ error: { code: 'items_pruned', details: { failures_pruned: 7 } } });
    const wholeRetry = await tenant.op(fewFailures.conversation, {
      action: 'retry_failed',
      operation_id: fewFailures.operationId,
    });
    expect(wholeRetry.status, JSON.stringify(wholeRetry.body)).toBe(200);
    expect(wholeRetry.body).toMatchObject({ total_items: 2 });

    // The pad citing a deleted item is still written, and its context still renders.
    const write = await tenant.tool(old.conversation, { add: { goals: [{ text: 'call back' }] } }, 'update_scratchpad');
    expect(write.status, JSON.stringify(write.body)).toBe(200);
    const context = await tenant.context(old.conversation);
    expect(context.status).toBe(200);
    expect(context.body.text).toContain('contact-5 asked for Tuesdays');

    // Nothing more is due: a second pass deletes nothing.
    const again = await h.pass();
    expect(Object.values(again.pruned).every((n) => n === 0)).toBe(true);

    const metrics = await harness.service.metrics.registry.metrics();
    expect(metrics).toMatch(/opspad_retention_rows_pruned_total\{table="assistant_operation_item"\} 265/);
  });

  it('never touches a live operation, however old: active and paused keep every row and event', async () => {
    const active = await h.finished(50, {}, 'none');
    const leased = await tenant.op(active.conversation, { action: 'progress', operation_id: active.operationId });
    await tenant.op(active.conversation, {
      action: 'update',
      operation_id: active.operationId,
      completed_ids: (leased.body.batch as string[]).slice(0, 5),
    });
    await tenant.op(active.conversation, { action: 'progress', operation_id: active.operationId }); // a lease held
    const paused = await h.finished(50, {}, 'none');
    await tenant.op(paused.conversation, {
      action: 'update',
      operation_id: paused.operationId,
      completed_ids: paused.itemIds.slice(0, 20),
      failed: [{ id: 'contact-30', reason: 'no phone' }],
    });
    await tenant.op(paused.conversation, { action: 'pause', operation_id: paused.operationId });
    const snapshot = async () => ({
      active: [await h.operationRow(active.operationId), await h.itemRows(active.operationId)],
      paused: [await h.operationRow(paused.operationId), await h.itemRows(paused.operationId)],
      events: [await h.eventKinds(active.operationId), await h.eventKinds(paused.operationId)],
    });
    // Far older than every limit (the paused one within OPSPAD_PAUSED_TTL, 7 days by default).
    for (const op of [active, paused]) {
      await h.backdate(op.operationId, 100);
    }
    const before = await snapshot();
    expect(before.active[1]).toHaveLength(50);
    expect(before.events[0]).toContain('batch_leased');

    await h.pass();

    expect(await snapshot()).toEqual(before);
  });

  it('deletes the batch events of old finished operations and keeps who did what', async () => {
    const old = await h.finished(30, { 'contact-4': 'no phone' });
    const recent = await h.finished(30);
    // An assistant's update is recorded as a batch event; create and complete say who did it.
    expect(await h.eventKinds(old.operationId)).toEqual(['created', 'batch_recorded', 'completed']);
    await h.backdate(old.operationId);

    const report = await h.pass();

    expect(report.pruned.operation_event).toBeGreaterThanOrEqual(1);
    expect(await h.eventKinds(old.operationId)).toEqual(['created', 'completed']);
    expect(await h.eventKinds(recent.operationId)).toEqual(['created', 'batch_recorded', 'completed']);
  });

  it('deletes an operator bulk action done longer ago than the events, with its targets; keeps a recent one', async () => {
    const organizationName = (
      await harness.db.query<{ name: string }>('SELECT name FROM organization WHERE id = $1', [tenant.organizationId])
    )[0]?.name as string;
    await h.finished(3);
    const action = (hoursAgo: number) =>
      createBulkAction(harness.db, {
        action: 'pause',
        filter: { org: organizationName },
        actor: 'operator:retention-test',
        maxOperations: 10_000,
      }).then(async (created) => {
        await harness.db.query(
          `UPDATE operator_bulk_action SET status = 'done', created_at = now() - make_interval(hours => $2) WHERE id = $1`,
          [created.id, hoursAgo],
        );
        return created;
      });
    const [done, recent] = [await action(2), await action(0)];
    expect(done.matched).toBeGreaterThan(0);
    const targets = (id: string) =>
      harness.db.query('SELECT 1 FROM operator_bulk_action_target WHERE bulk_action_id = $1', [id]);

    const report = await h.pass();

    expect(report.pruned.operator_bulk_action_target).toBeGreaterThanOrEqual(done.matched);
    expect(await getBulkAction(harness.db, done.id)).toBeNull();
    expect(await targets(done.id)).toEqual([]);
    expect((await getBulkAction(harness.db, recent.id))?.status).toBe('done');
    expect((await targets(recent.id)).length).toBe(recent.matched);
  });

  it("gives an organization's stored items back to its quota once their rows are deleted", async () => {
    const own = await harness.newTenant();
    const mine = helpers(harness, own);
    const storedItems = async () =>
      (
        await harness.db.query<{ n: number }>(
          'SELECT stored_items::int AS n FROM organization_quota WHERE organization_id = $1',
          [own.organizationId],
        )
      )[0]?.n;
    const old = await mine.finished(30);
    await mine.finished(12, {}, 'none');
    expect(await storedItems()).toBe(42);
    await mine.backdate(old.operationId);
    await mine.pass();
    expect(await mine.itemRows(old.operationId)).toEqual([]);
    expect(await storedItems()).toBe(12);
  });
});
