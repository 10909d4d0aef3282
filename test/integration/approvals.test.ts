/**
 * Consent before bulk side effects: with `opspad orgs policy --approve-above 10`, a background
 * operation of 20 items is created `awaiting_approval` and leases nothing (its items stay
 * pending while workers finish a smaller one); `get`, `progress` and the context fragment tell
 * the model it awaits the user's approval. An operator approves it through the admin API (it
 * then runs to exact counts) or rejects one through the operator view's button (it is
 * cancelled); the audit trail names who. Refusals change nothing.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defineHandler, ItemError } from '../../src/handlers/types.ts';
import { fileDatabaseUrl } from '../helpers/file-database.ts';
import { type Harness, ids, startHarness, type Tenant } from '../helpers/harness.ts';
import { runOpspad } from '../helpers/processes.ts';

const TYPE = 'consent_send';
const sender = defineHandler({
  type: TYPE,
  batchSize: 5,
  async handle(itemId) {
    if (itemId.startsWith('bad-')) {
      throw new ItemError('no phone');
    }
    return { sent: itemId };
  },
});

describe('approvals', () => {
  let harness: Harness;
  let tenant: Tenant;
  let orgName: string;
  const conversation = '7a0c1c1e-2f0b-4c55-9a0e-000000000031';

  const admin = (path: string, init: RequestInit = {}) =>
    harness.request<Record<string, unknown>>(path, {
      ...init,
      headers: {
        authorization: harness.adminAuthorization,
        origin: harness.url,
        'content-type': 'application/json',
        ...(init.headers as Record<string, string> | undefined),
      },
    });
  const statusOf = async (operationId: string) =>
    (
      await harness.db.query<{ status: string }>('SELECT status FROM assistant_operation WHERE id = $1', [operationId])
    )[0]?.status;
  const itemStatuses = async (operationId: string) =>
    Object.fromEntries(
      (
        await harness.db.query<{ status: string; n: number }>(
          'SELECT status, count(*)::int AS n FROM assistant_operation_item WHERE operation_id = $1 GROUP BY status',
          [operationId],
        )
      ).map((row) => [row.status, row.n]),
    );
  const events = (operationId: string) =>
    harness.db.query<{ kind: string; actor: string }>(
      'SELECT kind, actor FROM operation_event WHERE operation_id = $1 ORDER BY id',
      [operationId],
    );
  const createBackground = async (itemIds: string[], conversationId = conversation) => {
    const created = await tenant.op(conversationId, {
      action: 'create',
      operation_type: TYPE,
      total_items: itemIds.length,
      item_ids: itemIds,
      execution: 'background',
    });
    expect(created.status).toBe(200);
    return created.body as { operation_id: string; status: string };
  };

  beforeAll(async () => {
    harness = await startHarness('postgres', { workers: true, handlers: [sender] });
    tenant = await harness.newTenant();
    orgName = (
      await harness.db.query<{ name: string }>('SELECT name FROM organization WHERE id = $1', [tenant.organizationId])
    )[0]?.name as string;
  });

  afterAll(async () => {
    await harness?.close();
  });

  it('sets the policy with opspad orgs policy, and reads it back through the admin API', async () => {
    const run = await runOpspad(['orgs', 'policy', '--org', orgName, '--approve-above', '10', '--json'], {
      DATABASE_URL: fileDatabaseUrl(),
    });
    expect(run.code, run.stderr).toBe(0);
    expect(JSON.parse(run.stdout)).toEqual({
      organization_id: tenant.organizationId,
      organization: orgName,
      approve_above: 10,
    });
    const read = await admin(`/admin/approvals/policy/${encodeURIComponent(orgName)}`);
    expect(read.body.approve_above).toBe(10);

    const bad = await runOpspad(['orgs', 'policy', '--org', orgName, '--approve-above', 'many'], {
      DATABASE_URL: fileDatabaseUrl(),
    });
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toContain('--approve-above');
  });

  it('holds an operation above the threshold, leasing nothing, until an operator approves it', async () => {
    const held = await createBackground([...ids(18), 'bad-1', 'bad-2']);
    expect(held.status).toBe('awaiting_approval');
    // At the threshold or below: it runs at once, and workers finish it meanwhile.
    const small = await createBackground(ids(10, 'small-'), '7a0c1c1e-2f0b-4c55-9a0e-000000000032');
    expect(small.status).toBe('active');
    await expect.poll(() => statusOf(small.operation_id), { timeout: 30_000 }).toBe('completed');
    expect(await itemStatuses(held.operation_id)).toEqual({ pending: 20 });
    expect(await statusOf(held.operation_id)).toBe('awaiting_approval');

    // The model is told, wherever it looks.
    const got = await tenant.op(conversation, { action: 'get', operation_id: held.operation_id });
    expect(got.body.next).toMatch(/awaits the user's approval/);
    const progress = await tenant.op(conversation, { action: 'progress', operation_id: held.operation_id });
    expect(progress.status).toBe(200);
    expect(progress.body.batch).toEqual([]);
    expect(progress.body.next).toMatch(/awaits the user's approval/);
    const context = await tenant.context(conversation);
    expect(context.body.text).toContain('AWAITING_APPROVAL');
    expect(context.body.text).toContain("awaits the user's approval");
    expect(await itemStatuses(held.operation_id)).toEqual({ pending: 20 });

    const listed = await admin(`/admin/approvals?organization=${encodeURIComponent(orgName)}`);
    expect((listed.body.operations as { operation_id: string }[]).map((op) => op.operation_id)).toEqual([
      held.operation_id,
    ]);

    const approved = await admin(`/admin/approvals/${held.operation_id}/approve`, { method: 'POST' });
    expect(approved.status).toBe(200);
    expect(approved.body.status).toBe('active');
    await expect.poll(() => statusOf(held.operation_id), { timeout: 30_000 }).toBe('completed');
    expect(await itemStatuses(held.operation_id)).toEqual({ completed: 18, failed: 2 });
    expect(await events(held.operation_id)).toContainEqual({ kind: 'approved', actor: 'operator:admin' });
    // Decided once: a second approval changes nothing, a rejection is refused.
    const again = await admin(`/admin/approvals/${held.operation_id}/reject`, { method: 'POST' });
    expect(again.status).toBe(409);
  });

  it('rejects from the operator view: the operation is cancelled and the trail names who', async () => {
    const held = await createBackground(ids(12, 'r-'));
    expect(held.status).toBe('awaiting_approval');
    const html = await (
      await fetch(`${harness.url}/admin/operations/${held.operation_id}`, {
        headers: { authorization: harness.adminAuthorization },
      })
    ).text();
    expect(html).toContain(`action="/admin/approvals/${held.operation_id}/approve"`);
    expect(html).toContain(`action="/admin/approvals/${held.operation_id}/reject"`);

    const button = await fetch(`${harness.url}/admin/approvals/${held.operation_id}/reject`, {
      method: 'POST',
      headers: {
        authorization: harness.adminAuthorization,
        origin: harness.url,
        'content-type': 'application/x-www-form-urlencoded',
      },
      body: '',
      redirect: 'manual',
    });
    expect(button.status).toBe(303);
    expect(button.headers.get('location')).toBe(`/admin/operations/${held.operation_id}`);
    expect(await statusOf(held.operation_id)).toBe('cancelled');
    expect(await itemStatuses(held.operation_id)).toEqual({ abandoned: 12 });
    expect(await events(held.operation_id)).toContainEqual({ kind: 'rejected', actor: 'operator:admin' });
    // The operation's page shows the decision in its audit trail, with who, and no more buttons.
    const after = await (
      await fetch(`${harness.url}/admin/operations/${held.operation_id}`, {
        headers: { authorization: harness.adminAuthorization },
      })
    ).text();
    expect(after).toMatch(/rejected[\s\S]*operator:admin/);
    expect(after).not.toContain(`/admin/approvals/${held.operation_id}/approve`);
  });

  it('holds a retry_failed above the threshold for approval like a create', async () => {
    const retryConversation = '7a0c1c1e-2f0b-4c55-9a0e-000000000034';
    const held = await createBackground(ids(12, 'bad-r'), retryConversation);
    expect(held.status).toBe('awaiting_approval');
    expect((await admin(`/admin/approvals/${held.operation_id}/approve`, { method: 'POST' })).status).toBe(200);
    await expect.poll(() => statusOf(held.operation_id), { timeout: 30_000 }).toBe('completed');
    expect(await itemStatuses(held.operation_id)).toEqual({ failed: 12 });

    // 12 failed items retried: above 10, so a person approves the retry first.
    const retried = await tenant.op(retryConversation, { action: 'retry_failed', operation_id: held.operation_id });
    expect(retried.status).toBe(200);
    const retry = retried.body as { operation_id: string; status: string; total_items: number };
    expect(retry).toMatchObject({ status: 'awaiting_approval', total_items: 12 });
    expect(await itemStatuses(retry.operation_id)).toEqual({ pending: 12 });
    const progress = await tenant.op(retryConversation, { action: 'progress', operation_id: retry.operation_id });
    expect(progress.body.batch).toEqual([]);
    expect(progress.body.next).toMatch(/awaits the user's approval/);
    expect(await itemStatuses(retry.operation_id)).toEqual({ pending: 12 });

    const approved = await admin(`/admin/approvals/${retry.operation_id}/approve`, { method: 'POST' });
    expect(approved.body.status).toBe('active');
    await expect.poll(() => statusOf(retry.operation_id), { timeout: 30_000 }).toBe('completed');
    expect(await itemStatuses(retry.operation_id)).toEqual({ failed: 12 });
    expect(await events(retry.operation_id)).toContainEqual({ kind: 'approved', actor: 'operator:admin' });

    // At the threshold or below, a retry runs at once.
    const small = await createBackground(['bad-s1', 'bad-s2'], '7a0c1c1e-2f0b-4c55-9a0e-000000000035');
    await expect.poll(() => statusOf(small.operation_id), { timeout: 30_000 }).toBe('completed');
    const smallRetry = await tenant.op('7a0c1c1e-2f0b-4c55-9a0e-000000000035', {
      action: 'retry_failed',
      operation_id: small.operation_id,
    });
    expect(smallRetry.body.status).toBe('active');
  });

  it('refuses bad input, foreign origins and unknown ids, changing nothing', async () => {
    const held = await createBackground(ids(11, 'x-'));
    const crossSite = await admin(`/admin/approvals/${held.operation_id}/approve`, {
      method: 'POST',
      headers: { origin: 'https://elsewhere.example' },
    });
    expect(crossSite.status).toBe(403);
    const badPolicy = await admin(`/admin/approvals/policy/${encodeURIComponent(orgName)}`, {
      method: 'PUT',
      body: JSON.stringify({ approve_above: -1 }),
    });
    expect(badPolicy.status).toBe(400);
    expect(JSON.stringify(badPolicy.body)).toContain('approve_above');
    const unknown = await admin('/admin/approvals/00000000-0000-4000-8000-000000000000/approve', { method: 'POST' });
    expect(unknown.status).toBe(404);
    const noOrg = await admin('/admin/approvals/policy/no-such-organization');
    expect(noOrg.status).toBe(404);
    expect(await statusOf(held.operation_id)).toBe('awaiting_approval');
    expect((await admin(`/admin/approvals/policy/${encodeURIComponent(orgName)}`)).body.approve_above).toBe(10);

    // Turned off, background operations start at once again.
    const off = await admin(`/admin/approvals/policy/${encodeURIComponent(orgName)}`, {
      method: 'PUT',
      body: JSON.stringify({ approve_above: null }),
    });
    expect(off.body.approve_above).toBeNull();
    expect((await createBackground(ids(11, 'y-'), '7a0c1c1e-2f0b-4c55-9a0e-000000000033')).status).toBe('active');
  });
});
