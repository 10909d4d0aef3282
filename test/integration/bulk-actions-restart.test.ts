/**
 * Operator bulk actions in read-only mode (refused from the API and the operator view, nothing
 * created or changed; the confirmation page escapes what it shows), after a restart (an action a
 * stopped server left running is finished by the next one, which settles the claim it left from
 * the operation's audit trail instead of applying it twice), and on the embedded database.
 *
 * Then the runner as one of several servers, on a database of its own (the run's is swept by
 * every other file's servers): a lane that fails leaves the others tracked, so stop() waits for
 * them; a claim settled as stale and taken by another server is no longer its first server's to
 * record or release; a bulk resume never pauses an operation another server has just resumed.
 */
import { randomUUID } from 'node:crypto';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BulkFilter } from '../../src/domain/bulk-action.ts';
import {
  claimBulkTargets,
  createApiKey,
  createBulkAction,
  createOperation,
  finishBulkTarget,
  getBulkAction,
  type OpspadDatabase,
  pauseOperation,
  releaseBulkClaims,
  releaseStaleBulkTargets,
} from '../../src/store/index.ts';
import { bulkActionRunner } from '../../src/tools/bulk-action-runner.ts';
import { createToolRegistry, type ToolRegistry } from '../../src/tools/registry.ts';
import { type Harness, ids, newStoreOperation, openTestDatabase, startHarness } from '../helpers/harness.ts';
import { type PrivateDatabase, privatePostgresDatabase } from '../helpers/private-database.ts';
import { eventually } from '../helpers/wait.ts';

type Json = Record<string, unknown>;

function adminOf(harness: () => Harness) {
  return (path: string, body?: unknown, headers: Record<string, string> = {}) =>
    harness().request<Json>(path, {
      method: body === undefined ? 'GET' : 'POST',
      headers: { authorization: harness().adminAuthorization, 'content-type': 'application/json', ...headers },
      body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
    });
}

describe('bulk actions, read-only and after a restart', () => {
  let harness: Harness | undefined;
  afterAll(async () => {
    await harness?.close();
  });

  it('refuses a bulk action in read-only mode, from the API and the operator view', async () => {
    harness = await startHarness('postgres', { env: { OPSPAD_ADMIN_READONLY: 'true' } });
    const { scope, operationId } = await newStoreOperation(harness.db, 4, 2);
    const [org] = await harness.db.query<{ name: string }>('SELECT name FROM organization WHERE id = $1', [
      scope.organizationId,
    ]);
    const admin = adminOf(() => harness as Harness);
    const refused = await admin('/admin/bulk-actions', { action: 'pause', filter: { org: org?.name } });
    expect(refused.status).toBe(403);
    expect(JSON.stringify(refused.body)).toContain('OPSPAD_ADMIN_READONLY');
    const form = await fetch(`${harness.url}/admin/operations/bulk`, {
      method: 'POST',
      headers: {
        authorization: harness.adminAuthorization,
        origin: harness.url,
        'content-type': 'application/x-www-form-urlencoded',
      },
      body: `action=pause&org=${org?.name}&expected_matched=1&confirm=yes`,
      redirect: 'manual',
    });
    expect(form.status).toBe(403);
    // The preview still answers; nothing was created or changed.
    const preview = await admin('/admin/bulk-actions/preview', { action: 'pause', filter: { org: org?.name } });
    expect(preview.body.matched).toBe(1);
    const [count] = await harness.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM operator_bulk_action WHERE filter->>'org' = $1`,
      [org?.name],
    );
    expect(count?.n).toBe(0);
    const [op] = await harness.db.query<{ status: string }>('SELECT status FROM assistant_operation WHERE id = $1', [
      operationId,
    ]);
    expect(op?.status).toBe('active');
    // The confirmation page escapes what it shows.
    const page = await fetch(`${harness.url}/admin/operations/bulk?action=pause&q=${encodeURIComponent('<b>x</b>')}`, {
      headers: { authorization: harness.adminAuthorization },
    });
    const html = await page.text();
    expect(html).toContain('&#60;b&#62;x&#60;/b&#62;');
    expect(html).not.toContain('<b>x</b>');
    await harness.close();
    harness = undefined;
  });

  it('finishes an action a stopped server left running, applying each operation once', async () => {
    const db = await openTestDatabase('postgres');
    const first = await newStoreOperation(db, 4, 2);
    const second = { organizationId: first.scope.organizationId, conversationId: randomUUID() };
    const { operation } = await createOperation(db, second, {
      operationType: 'send_sms',
      itemIds: ids(4),
      batchSize: 2,
      queryParams: null,
      notes: null,
      execution: 'assistant',
      actor: 'test',
    });
    const [org] = await db.query<{ name: string }>('SELECT name FROM organization WHERE id = $1', [
      first.scope.organizationId,
    ]);
    const action = await createBulkAction(db, {
      action: 'pause',
      filter: { org: org?.name },
      actor: 'operator:admin',
      maxOperations: 10,
    });
    expect(action).toMatchObject({ status: 'running', matched: 2, applied: 0 });
    // The stopped server had claimed the first and paused it, but not recorded the outcome.
    await pauseOperation(db, first.scope, first.operationId, {
      actor: 'operator:admin',
      reason: 'paused by operator admin',
      pausedBy: 'operator:admin',
      eventData: { bulk_action_id: action.id },
    });
    await db.query(
      `UPDATE operator_bulk_action_target SET state = 'applying', detail = (now() - interval '5 minutes')::text
       WHERE bulk_action_id = $1 AND operation_id = $2`,
      [action.id, first.operationId],
    );
    await db.close();

    harness = await startHarness('postgres');
    const admin = adminOf(() => harness as Harness);
    const done = await eventually(
      async () => {
        const got = await admin(`/admin/bulk-actions/${action.id}`);
        return got.body.status === 'done' ? got.body : undefined;
      },
      { what: 'the action finished by the new server' },
    );
    expect(done).toMatchObject({ matched: 2, applied: 2, skipped: 0 });
    const events = await harness.db.query<{ operation_id: string; kind: string }>(
      `SELECT operation_id, kind FROM operation_event WHERE operation_id = ANY($1::uuid[]) AND kind = 'paused'`,
      [[first.operationId, operation.id]],
    );
    expect(events.filter((e) => e.operation_id === first.operationId)).toHaveLength(1);
    expect(events.filter((e) => e.operation_id === operation.id)).toHaveLength(1);
    const [state] = await harness.db.query<{ status: string }>('SELECT status FROM assistant_operation WHERE id = $1', [
      operation.id,
    ]);
    expect(state?.status).toBe('paused');
  });

  it('runs on the embedded database (PGlite) too', async () => {
    await harness?.close();
    harness = await startHarness('pglite');
    const tenant = await harness.newTenant();
    const created: string[] = [];
    for (const conversation of [randomUUID(), randomUUID()]) {
      const op = await tenant.op(conversation, {
        action: 'create',
        operation_type: 'embedded_bulk',
        total_items: 2,
        item_ids: ids(2),
      });
      created.push(op.body.operation_id as string);
    }
    const admin = adminOf(() => harness as Harness);
    const action = await admin('/admin/bulk-actions', { action: 'cancel', filter: { type: 'embedded_bulk' } });
    expect(action.status).toBe(202);
    const done = await eventually(
      async () => {
        const got = await admin(`/admin/bulk-actions/${action.body.id}`);
        return got.body.status === 'done' ? got.body : undefined;
      },
      { what: 'the action done on PGlite' },
    );
    expect(done).toMatchObject({ matched: 2, applied: 2, skipped: 0 });
    const rows = await harness.db.query<{ status: string; events: number }>(
      `SELECT o.status, (SELECT count(*)::int FROM operation_event e
                         WHERE e.operation_id = o.id AND e.data->>'bulk_action_id' = $2) AS events
       FROM assistant_operation o WHERE o.id = ANY($1::uuid[])`,
      [created, action.body.id],
    );
    expect(rows).toEqual([
      { status: 'cancelled', events: 1 },
      { status: 'cancelled', events: 1 },
    ]);
  });
});

describe('bulk actions on several servers', () => {
  let database: PrivateDatabase;
  let db: OpspadDatabase;
  let tools: ToolRegistry;
  let organizationId: string;
  /** What the runners logged at warn and above. */
  const logged: string[] = [];
  const logger = pino({ level: 'warn' }, { write: (line: string) => logged.push(line) });

  beforeAll(async () => {
    database = await privatePostgresDatabase('bulk');
    db = await openTestDatabase('postgres', database.url);
    tools = createToolRegistry({ db, maxItems: 10, hasHandler: () => false, reciteBudget: 4000 });
    organizationId = (await createApiKey(db, `org-${randomUUID()}`)).organization_id;
  });
  afterAll(async () => {
    await db?.close();
    await database?.drop();
  });

  /** An assistant operation of `type` in `conversationId` (a new conversation by default). */
  const operation = async (type: string, conversationId: string = randomUUID()) =>
    (
      await createOperation(
        db,
        { organizationId, conversationId },
        {
          operationType: type,
          itemIds: ids(2),
          batchSize: 2,
          queryParams: null,
          notes: null,
          execution: 'assistant',
          actor: 'test',
        },
      )
    ).operation.id;
  const action = (name: 'pause' | 'resume' | 'cancel', filter: BulkFilter) =>
    createBulkAction(db, { action: name, filter, actor: 'operator:admin', maxOperations: 10 });
  const targetStates = async (id: string) =>
    (
      await db.query<{ state: string }>(
        'SELECT state FROM operator_bulk_action_target WHERE bulk_action_id = $1 ORDER BY state',
        [id],
      )
    ).map((t) => t.state);

  it('keeps the other lanes of an action tracked when one fails, so stop() waits for them', async () => {
    const type = `lanes_${randomUUID().slice(0, 8)}`;
    for (let i = 0; i < 4; i++) {
      await operation(type);
    }
    // A cancel claims one operation per lane: four lanes, one each.
    const cancel = await action('cancel', { type });
    let calls = 0;
    let inFlight = 0;
    let open: () => void = () => {};
    const gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    // The first call fails as a lost connection would; the others wait at the gate.
    const failing: ToolRegistry = {
      ...tools,
      async execute(name, input, ctx) {
        calls += 1;
        if (calls === 1) {
          throw new Error('connection terminated unexpectedly');
        }
        inFlight += 1;
        try {
          await gate;
          return await tools.execute(name, input, ctx);
        } finally {
          inFlight -= 1;
        }
      },
    };
    const runner = bulkActionRunner({ db, tools: failing, logger });
    runner.run(cancel.id);
    await eventually(async () => (calls === 4 && inFlight === 3 ? true : undefined), {
      what: 'one lane failed and three at the gate',
    });
    const stopping = runner.stop();
    open();
    await stopping;
    // Nothing is still being applied once stop() resolves: the three lanes were waited for.
    expect(inFlight).toBe(0);
    expect(await targetStates(cancel.id)).toEqual(['applied', 'applied', 'applied', 'applying']);
    expect(logged.join('\n')).toContain('connection terminated unexpectedly');
  });

  it('skips a resume, on any server, while another operation of its conversation is active', async () => {
    const conversationId = randomUUID();
    const scope = { organizationId, conversationId };
    const x = await operation(`resume_x_${randomUUID().slice(0, 8)}`, conversationId);
    const yType = `resume_y_${randomUUID().slice(0, 8)}`;
    // Creating Y pauses X; then Y is paused too.
    const y = await operation(yType, conversationId);
    await pauseOperation(db, scope, y, { actor: 'test', reason: 'test', pausedBy: 'operator:test' });
    const resume = await action('resume', { type: yType });
    const runner = bulkActionRunner({ db, tools, logger });
    await db.transaction(async (tx) => {
      // Another server resuming X, between taking the conversation's lock and committing: this
      // server's look at the conversation before its resume finds nothing active.
      await tx.query('SELECT 1 FROM assistant_conversation WHERE organization_id = $1 AND id = $2 FOR UPDATE', [
        organizationId,
        conversationId,
      ]);
      await tx.query(`UPDATE assistant_operation SET status = 'active' WHERE id = $1`, [x]);
      runner.run(resume.id);
      await eventually(
        async () =>
          (
            await db.query(
              `SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`,
            )
          ).length > 0 || undefined,
        { what: "the resume of Y waiting for the conversation's lock" },
      );
    });
    const done = await eventually(
      async () => {
        const got = await getBulkAction(db, resume.id);
        return got?.status === 'done' ? got : undefined;
      },
      { what: 'the resume done' },
    );
    await runner.stop();
    expect(done).toMatchObject({ matched: 1, applied: 0, skipped: 1 });
    const [skipped] = await db.query<{ detail: string }>(
      'SELECT detail FROM operator_bulk_action_target WHERE bulk_action_id = $1',
      [resume.id],
    );
    expect(skipped?.detail).toBe(
      `operation ${x} is active in its conversation, and resuming this one would pause it; resume it on its own if that is meant`,
    );
    const statuses = await db.query<{ id: string; status: string }>(
      'SELECT id, status FROM assistant_operation WHERE id = ANY($1::uuid[]) ORDER BY status',
      [[x, y]],
    );
    expect(statuses).toEqual([
      { id: x, status: 'active' },
      { id: y, status: 'paused' },
    ]);
  });

  it('lets only the server holding a claim record or release it, once another took it over', async () => {
    const type = `claims_${randomUUID().slice(0, 8)}`;
    await operation(type);
    const pause = await action('pause', { type });
    // Server A claims the operation, then says nothing for longer than a claim lasts.
    const [first] = await claimBulkTargets(db, pause.id, null, 1);
    expect(await releaseStaleBulkTargets(db, 0)).toBeGreaterThanOrEqual(1);
    expect(await targetStates(pause.id)).toEqual(['pending']);
    // Server B claims it again.
    const [second] = await claimBulkTargets(db, pause.id, null, 1);
    if (!first || !second) {
      throw new Error('the operation was not claimed twice');
    }
    expect(second.operation_id).toBe(first.operation_id);
    // A's late outcome and release change nothing: the claim is B's.
    await finishBulkTarget(db, pause.id, first, { state: 'skipped', detail: 'too late' });
    await releaseBulkClaims(db, pause.id, [first]);
    const [held] = await db.query<{ state: string; detail: string }>(
      'SELECT state, detail FROM operator_bulk_action_target WHERE bulk_action_id = $1',
      [pause.id],
    );
    expect(held?.state).toBe('applying');
    expect(held?.detail).toBe(second.claim);
    expect(second.claim).not.toBe(first.claim);
    expect(await getBulkAction(db, pause.id)).toMatchObject({ applied: 0, skipped: 0, pending: 1 });
    // B's outcome is the one recorded, once.
    await finishBulkTarget(db, pause.id, second, { state: 'applied', detail: null });
    expect(await targetStates(pause.id)).toEqual(['applied']);
    expect(await getBulkAction(db, pause.id)).toMatchObject({ applied: 1, skipped: 0, pending: 0 });
  });
});
