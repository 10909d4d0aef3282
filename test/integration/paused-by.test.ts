/**
 * Who paused an operation, as the model and programs hear it: the context fragment, `get`,
 * `progress` and `GET /v1/operations/:id` say whether it was the assistant itself, an operator
 * (then the model is told to ask the user before resuming), the circuit breaker, or a newer
 * operation — also for operations paused before `paused_by` was kept (from the audit trail).
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, ids, startHarness, type Tenant } from '../helpers/harness.ts';

describe('who paused it (postgres)', () => {
  let harness: Harness;
  let tenant: Tenant;

  beforeAll(async () => {
    harness = await startHarness('postgres');
    tenant = await harness.newTenant();
  });
  afterAll(async () => {
    await harness.close();
  });

  const create = async (conversation: string, type: string, extra: Record<string, unknown> = {}) => {
    const created = await tenant.op(conversation, {
      action: 'create',
      operation_type: type,
      total_items: 60,
      item_ids: ids(60),
      ...extra,
    });
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    return created.body.operation_id as string;
  };
  const get = async (conversation: string, operationId: string) =>
    (await tenant.op(conversation, { action: 'get', operation_id: operationId })).body;

  it('the assistant, a newer operation, the circuit breaker', async () => {
    const conversation = randomUUID();
    const mine = await create(conversation, 'paused_by_me');
    const paused = await tenant.op(conversation, { action: 'pause', operation_id: mine });
    expect(paused.body).toMatchObject({ status: 'paused', paused_by: { kind: 'assistant' } });
    expect(await get(conversation, mine)).toMatchObject({
      paused_by: { kind: 'assistant' },
      paused_reason: 'paused by the assistant',
      next: expect.stringContaining(`You paused it. To continue: {"action":"resume","operation_id":"${mine}"}`),
    });

    const older = await create(conversation, 'older');
    const newer = await create(conversation, 'breaker', { max_failure_rate: 0.2, batch_size: 50 });
    expect(await get(conversation, older)).toMatchObject({ paused_by: { kind: 'newer_operation' } });

    // 50 failures in a row trip the breaker of the newer one.
    await tenant.op(conversation, { action: 'progress', operation_id: newer });
    await tenant.op(conversation, {
      action: 'update',
      operation_id: newer,
      failed: ids(50).map((id) => ({ id, reason: 'bounced' })),
    });
    expect(await get(conversation, newer)).toMatchObject({
      status: 'paused',
      paused_by: { kind: 'circuit_breaker' },
      next: expect.stringContaining('The circuit breaker paused it'),
    });
    const summary = await tenant.get(`/v1/operations/${newer}`);
    expect(summary.body).toMatchObject({ status: 'paused', paused_by: { kind: 'circuit_breaker' } });

    const { text } = (await tenant.context(conversation)).body;
    expect(text).toContain(
      `breaker, 50/60 done (50 failed), id ${newer}: paused by the circuit breaker (50 of the last 50 items failed): get the failures, fix the cause, then resume.`,
    );
    expect(text).toContain(`older, 0/60 done, id ${older}: paused by a newer operation; resume to continue.`);
    expect(text).toContain(`paused_by_me, 0/60 done, id ${mine}: paused by you; resume to continue.`);

    // Resumed, it is no longer "paused by" anyone.
    await tenant.op(conversation, { action: 'resume', operation_id: mine });
    expect(await get(conversation, mine)).toMatchObject({ status: 'active', paused_by: null });
  });

  it('an operator, also for a pause recorded before paused_by was kept', async () => {
    const conversation = randomUUID();
    const operationId = await create(conversation, 'invoices');
    const pressed = await fetch(`${harness.url}/admin/operations/${operationId}/pause`, {
      method: 'POST',
      redirect: 'manual',
      headers: {
        authorization: harness.adminAuthorization,
        origin: harness.url,
        referer: `${harness.url}/admin/operations`,
        'content-type': 'application/x-www-form-urlencoded',
      },
      body: 'action=pause',
    });
    expect(pressed.status).toBe(303);
    const expected = `invoices, 0/60 done, id ${operationId}: paused by operator admin: ask the user before resume.`;
    expect((await tenant.context(conversation)).body.text).toContain(expected);
    const progress = await tenant.op(conversation, { action: 'progress', operation_id: operationId });
    expect(progress.body.next).toBe(
      `The operation is paused. Operator admin paused it: ask the user before resuming it, and only if they agree call {"action":"resume","operation_id":"${operationId}"}.`,
    );

    // As an older row: no paused_by in its state, the reason the tool used to write.
    await harness.db.query(
      `UPDATE assistant_operation SET state_json = (state_json - 'paused_by') || '{"paused_reason": "paused by the assistant"}'::jsonb
       WHERE id = $1`,
      [operationId],
    );
    expect((await tenant.context(conversation)).body.text).toContain(expected);
    expect(await get(conversation, operationId)).toMatchObject({ paused_by: { kind: 'operator', name: 'admin' } });
  });
});
