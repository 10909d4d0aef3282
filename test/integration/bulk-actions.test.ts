/**
 * Operator bulk actions, on both queue backends: two organizations with background operations
 * of two types, held in flight by a gated handler. A bulk pause by organization and type pauses
 * exactly those (checked at the database; the workers are signalled for those batches only),
 * not one created after it; its record and each operation's audit trail say who, the filter and
 * how many. The operator view's confirmation
 * resumes them and the workers then complete everything; `opspad ops pause --yes` does the same
 * against the running server. Refusals (a bad filter, a filter over OPSPAD_MAX_BULK_OPERATIONS,
 * a stale count) change nothing. Read-only mode and restarts: bulk-actions-restart.test.ts.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defineHandler } from '../../src/handlers/types.ts';
import { type Harness, ids, QUEUE_BACKENDS, startHarness, type Tenant } from '../helpers/harness.ts';
import { runOpspad } from '../helpers/processes.ts';
import { eventually } from '../helpers/wait.ts';

type Json = Record<string, unknown>;
const MAX = 4;

function adminOf(harness: () => Harness) {
  return (path: string, body?: unknown, headers: Record<string, string> = {}) =>
    harness().request<Json>(path, {
      method: body === undefined ? 'GET' : 'POST',
      headers: { authorization: harness().adminAuthorization, 'content-type': 'application/json', ...headers },
      body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
    });
}

async function orgName(harness: Harness, tenant: Tenant): Promise<string> {
  const [row] = await harness.db.query<{ name: string }>('SELECT name FROM organization WHERE id = $1', [
    tenant.organizationId,
  ]);
  return row?.name as string;
}

describe.each(QUEUE_BACKENDS)('bulk actions (%s queue)', (queue) => {
  let harness: Harness;
  let a: Tenant;
  let b: Tenant;
  let orgA: string;
  let orgB: string;
  let open: () => void = () => {};
  const gate = new Promise<void>((resolve) => {
    open = resolve;
  });
  /** Operations whose batches the handler runs, and those whose batch was told to stop. */
  const running = new Set<string>();
  const signalled = new Set<string>();
  const gated = (type: string) =>
    defineHandler({
      type,
      batchSize: 2,
      concurrency: 16,
      async handle(itemId, ctx) {
        running.add(ctx.operationId);
        ctx.signal.addEventListener('abort', () => signalled.add(ctx.operationId), { once: true });
        await gate;
        return { done: itemId };
      },
    });
  /** Operation ids by `${org letter}/${type}`. */
  const ops = new Map<string, string[]>();
  const admin = adminOf(() => harness);

  const create = async (tenant: Tenant, type: string) => {
    const created = await tenant.op(randomUUID(), {
      action: 'create',
      operation_type: type,
      total_items: 4,
      item_ids: ids(4),
      execution: 'background',
    });
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    return created.body.operation_id as string;
  };
  const statuses = async (operationIds: readonly string[]) =>
    (
      await harness.db.query<{ status: string }>(
        'SELECT status FROM assistant_operation WHERE id = ANY($1::uuid[]) ORDER BY status',
        [operationIds],
      )
    ).map((r) => r.status);
  const allOps = () => [...ops.values()].flat();
  const finishedAction = (id: string) =>
    eventually(
      async () => {
        const got = await admin(`/admin/bulk-actions/${id}`);
        return got.body.status === 'done' ? got.body : undefined;
      },
      { what: `bulk action ${id} done` },
    );

  beforeAll(async () => {
    harness = await startHarness('postgres', {
      workers: true,
      queue,
      handlers: [gated('bulk_a'), gated('bulk_b')],
      env: { OPSPAD_MAX_BULK_OPERATIONS: String(MAX) },
    });
    a = await harness.newTenant();
    b = await harness.newTenant();
    orgA = await orgName(harness, a);
    orgB = await orgName(harness, b);
    for (const [letter, tenant] of [
      ['A', a],
      ['B', b],
    ] as const) {
      for (const type of ['bulk_a', 'bulk_b']) {
        ops.set(`${letter}/${type}`, [await create(tenant, type), await create(tenant, type)]);
      }
    }
    // Every operation has a batch in flight, held by the gate.
    await eventually(async () => (allOps().every((op) => running.has(op)) ? true : undefined), {
      what: 'a batch of every operation in flight',
    });
  });

  afterAll(async () => {
    open();
    await harness?.close();
  });

  it('previews, then pauses exactly the operations of one organization and type, with its audit', async () => {
    const filter = { org: orgA, type: 'bulk_a' };
    const preview = await admin('/admin/bulk-actions/preview', { action: 'pause', filter });
    expect(preview.status).toBe(200);
    expect(preview.body).toMatchObject({ matched: 2, by_status: { active: 2 }, applicable: 2, max_operations: MAX });

    const created = await admin('/admin/bulk-actions', { action: 'pause', filter, expected_matched: 2 });
    expect(created.status, JSON.stringify(created.body)).toBe(202);
    const id = created.body.id as string;
    expect(created.body).toMatchObject({ matched: 2, actor: 'operator:admin', filter });
    // Created after the action: not among its operations.
    const late = await create(a, 'bulk_a');

    const done = await finishedAction(id);
    expect(done).toMatchObject({ matched: 2, applied: 2, skipped: 0, pending: 0, skipped_operations: [] });
    const paused = [...(ops.get('A/bulk_a') as string[])];
    // The workers were told to stop those batches (the queue backend's control channel), no other.
    await eventually(async () => (paused.every((op) => signalled.has(op)) ? true : undefined), {
      what: 'the pause signal to the workers',
    });
    expect([...signalled].sort()).toEqual([...paused].sort());
    expect(await statuses(paused)).toEqual(['paused', 'paused']);
    const others = allOps().filter((op) => !paused.includes(op));
    expect(await statuses([...others, late])).toEqual(Array(others.length + 1).fill('active'));
    const targets = await harness.db.query<{ operation_id: string; state: string }>(
      'SELECT operation_id, state FROM operator_bulk_action_target WHERE bulk_action_id = $1 ORDER BY operation_id',
      [id],
    );
    expect(targets).toEqual([...paused].sort().map((operation_id) => ({ operation_id, state: 'applied' })));
    ops.get('A/bulk_a')?.push(late);

    // Each operation's audit trail names the action; the action's record says who, what, how many.
    const events = await harness.db.query<{ operation_id: string; kind: string; actor: string }>(
      `SELECT operation_id, kind, actor FROM operation_event WHERE data->>'bulk_action_id' = $1 ORDER BY operation_id`,
      [id],
    );
    expect(events).toEqual(
      [...paused].sort().map((operation_id) => ({ operation_id, kind: 'paused', actor: 'operator:admin' })),
    );
    const [row] = await harness.db.query<Json>(
      'SELECT action, filter, actor, status, matched, applied, skipped FROM operator_bulk_action WHERE id = $1',
      [id],
    );
    expect(row).toEqual({
      action: 'pause',
      filter,
      actor: 'operator:admin',
      status: 'done',
      matched: 2,
      applied: 2,
      skipped: 0,
    });
    const list = await admin('/admin/bulk-actions?limit=100');
    expect((list.body.bulk_actions as Json[]).map((x) => x.id)).toContain(id);
  });

  it('refuses a bad filter, one over OPSPAD_MAX_BULK_OPERATIONS and a stale count, changing nothing', async () => {
    const before = await statuses(allOps());
    const [{ now } = { now: new Date() }] = await harness.db.query<{ now: Date }>('SELECT now()');
    const refusals: [unknown, number, string][] = [
      [{ action: 'pause', filter: { org: orgA, status: 'sleeping' } }, 400, 'filter.status'],
      [{ action: 'halt', filter: { org: orgA } }, 400, 'action'],
      [{ action: 'pause', filter: {} }, 400, 'give at least one of org'],
      [{ action: 'pause', filter: { org: orgA, created_after: 'yesterday' } }, 400, 'filter.created_after'],
      [
        { action: 'pause', filter: { org: orgA, created_before: '0000-01-01T00:00:00Z' } },
        400,
        'filter.created_before: has year 0000',
      ],
      [
        { action: 'pause', filter: { org: orgA } },
        400,
        'matches 5 operations, more than the 4 one bulk action takes (OPSPAD_MAX_BULK_OPERATIONS)',
      ],
      [
        { action: 'cancel', filter: { org: orgB, type: 'bulk_b' }, expected_matched: 7 },
        409,
        'matches 2 operations now',
      ],
    ];
    for (const [body, status, names] of refusals) {
      const refused = await admin('/admin/bulk-actions', body);
      expect(refused.status, JSON.stringify(body)).toBe(status);
      expect(JSON.stringify(refused.body)).toContain(names);
    }
    // ISO times Postgres's timestamptz refuses: a 400 from the preview too, not the statement's 500.
    for (const created_before of ['0000-01-01T00:00:00Z', '2026-01-01T00:00:00+16:00']) {
      const preview = await admin('/admin/bulk-actions/preview', { action: 'pause', filter: { created_before } });
      expect(preview.status, created_before).toBe(400);
      expect(JSON.stringify(preview.body)).toContain('filter.created_before: has');
    }
    const notJson = await admin('/admin/bulk-actions', 'action=pause', { 'content-type': 'text/plain' });
    expect(notJson.status).toBe(400);
    expect(JSON.stringify(notJson.body)).toContain('Content-Type');
    const [counted] = await harness.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM operator_bulk_action
       WHERE created_at >= $3 AND (filter->>'org' IN ($1, $2) OR filter->>'type' = 'bulk_a')`,
      [orgA, orgB, now],
    );
    expect(counted?.n).toBe(0);
    expect(await statuses(allOps())).toEqual(before);
  });

  it('runs from `opspad ops pause --yes` against the running server, and refuses to guess without a terminal', async () => {
    const env = { OPSPAD_URL: harness.url, OPSPAD_ADMIN_PASSWORD: 'test-admin-password' };
    const args = ['ops', 'pause', '--org', orgB, '--type', 'bulk_b'];
    const unconfirmed = await runOpspad(args, env);
    expect(unconfirmed.code).toBe(2);
    expect(unconfirmed.stdout).toContain('2 operation(s) match (2 active); pause changes 2 of them now.');
    expect(unconfirmed.stderr).toContain('--yes');
    expect(await statuses(ops.get('B/bulk_b') as string[])).toEqual(['active', 'active']);

    const unfiltered = await runOpspad(['ops', 'cancel', '--yes'], env);
    expect(unfiltered.code).toBe(2);
    expect(unfiltered.stderr).toContain('opspad ops cancel: no filter was given.');

    const run = await runOpspad([...args, '--yes', '--json'], env);
    expect(run.code, run.stderr).toBe(0);
    const done = JSON.parse(run.stdout) as Json;
    expect(done).toMatchObject({ status: 'done', matched: 2, applied: 2, skipped: 0, actor: 'operator:admin' });
    expect(await statuses(ops.get('B/bulk_b') as string[])).toEqual(['paused', 'paused']);
  });

  it('resumes from the operator view’s confirmation, and the workers then complete every operation', async () => {
    const auth = { authorization: harness.adminAuthorization };
    const list = await fetch(`${harness.url}/admin/operations?org=${orgA}&type=bulk_a`, { headers: auth });
    expect(await list.text()).toContain('Resume all 3 matching…');
    const confirm = await fetch(`${harness.url}/admin/operations/bulk?action=resume&org=${orgA}&type=bulk_a`, {
      headers: auth,
    });
    const page = await confirm.text();
    expect(page).toContain('<strong>3</strong> operation(s) match now');
    expect(page).toContain(orgA);
    const form = `action=resume&org=${orgA}&type=bulk_a&expected_matched=3&confirm=yes`;
    const formHeaders = { ...auth, 'content-type': 'application/x-www-form-urlencoded' };
    const forged = await fetch(`${harness.url}/admin/operations/bulk`, {
      method: 'POST',
      headers: { ...formHeaders, origin: 'https://elsewhere.example' },
      body: form,
      redirect: 'manual',
    });
    expect(forged.status).toBe(403);
    const posted = await fetch(`${harness.url}/admin/operations/bulk`, {
      method: 'POST',
      headers: { ...formHeaders, origin: harness.url },
      body: form,
      redirect: 'manual',
    });
    expect(posted.status).toBe(303);
    const id = String(posted.headers.get('location')).split('/').pop() as string;
    // The late operation was active: skipped, with why.
    const done = await finishedAction(id);
    expect(done).toMatchObject({ matched: 3, applied: 2, skipped: 1 });
    expect(done.skipped_operations).toEqual([
      { operation_id: (ops.get('A/bulk_a') as string[])[2], reason: 'it is already active' },
    ]);
    const progress = await fetch(`${harness.url}/admin/operations/bulk/${id}`, { headers: auth });
    expect(await progress.text()).toContain('it is already active');
    const listed = await fetch(`${harness.url}/admin/operations/bulk`, { headers: auth });
    expect(await listed.text()).toContain(`href="/admin/operations/bulk/${id}">resume</a>`);

    const resumedB = await admin('/admin/bulk-actions', { action: 'resume', filter: { org: orgB, status: 'paused' } });
    expect((await finishedAction(resumedB.body.id as string)).applied).toBe(2);
    expect(await statuses(allOps())).toEqual(Array(allOps().length).fill('active'));
    open();
    await expect.poll(() => statuses(allOps()), { timeout: 60_000 }).toEqual(Array(allOps().length).fill('completed'));
  });

  it('skips what the action does not apply to, with the reason, and changes nothing there', async () => {
    const created = await admin('/admin/bulk-actions', { action: 'cancel', filter: { org: orgB, type: 'bulk_a' } });
    const done = await finishedAction(created.body.id as string);
    expect(done).toMatchObject({ matched: 2, applied: 0, skipped: 2 });
    expect((done.skipped_operations as Json[]).map((s) => s.reason)).toEqual([
      'it is completed: it cannot be cancelled',
      'it is completed: it cannot be cancelled',
    ]);
    expect(await statuses(ops.get('B/bulk_a') as string[])).toEqual(['completed', 'completed']);
  });
});
