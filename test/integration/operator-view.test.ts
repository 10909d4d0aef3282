/**
 * The operator view at /admin/operations: behind basic auth, every organization's operations
 * with progress and failure reasons, tenant text escaped, and buttons that pause, resume and
 * cancel through the operation tool — refused when the form does not come from the page itself.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, ids, startHarness, type Tenant } from '../helpers/harness.ts';

describe('the operator view (postgres)', () => {
  let harness: Harness;
  let tenant: Tenant;
  let operationId: string;
  const conversation = randomUUID();

  beforeAll(async () => {
    harness = await startHarness('postgres');
    tenant = await harness.newTenant();
    const created = await tenant.op(conversation, {
      action: 'create',
      operation_type: '<script>alert(1)</script>',
      total_items: 4,
      item_ids: ids(4),
    });
    operationId = created.body.operation_id as string;
    await tenant.op(conversation, {
      action: 'update',
      operation_id: operationId,
      completed_ids: ['contact-1'],
      failed: [{ id: 'contact-2', reason: 'opted out <b>twice</b>' }],
    });
  });
  afterAll(async () => {
    await harness.close();
  });

  const admin = (path: string, init: RequestInit = {}) =>
    fetch(`${harness.url}${path}`, {
      ...init,
      redirect: 'manual',
      headers: { authorization: harness.adminAuthorization, ...(init.headers as Record<string, string>) },
    });

  it('needs the operator credentials', async () => {
    expect((await fetch(`${harness.url}/admin/operations`)).status).toBe(401);
    const withApiKey = await fetch(`${harness.url}/admin/operations`, {
      headers: { authorization: `Bearer ${tenant.apiKey}` },
    });
    expect(withApiKey.status).toBe(401);
  });

  it('lists operations with progress and failure reasons, escaping what tenants wrote', async () => {
    const response = await admin('/admin/operations');
    expect(response.status).toBe(200);
    const html = await response.text();
    expect(html).toContain(`data-operation-id="${operationId}"`);
    expect(html).toContain('&#60;script&#62;alert(1)&#60;/script&#62;');
    expect(html).not.toContain('<script>alert(1)');
    expect(html).toContain('contact-2: opted out &#60;b&#62;twice&#60;/b&#62;');
    expect(html).toMatch(/<span class="recorded">2<\/span>\/4 recorded · 1 failed · 2 remaining/);
    expect(html).toContain(`action="/admin/operations/${operationId}/pause"`);

    const otherOrg = await admin('/admin/operations?org=no-such-organization');
    expect(await otherOrg.text()).not.toContain(operationId);
    const detail = await admin(`/admin/operations/${operationId}`);
    expect(await detail.text()).toContain('<td>contact-2</td><td>opted out &#60;b&#62;twice&#60;/b&#62;</td>');
  });

  it('pauses, resumes and cancels with the buttons, as the operator', async () => {
    const forged = await admin(`/admin/operations/${operationId}/pause`, {
      method: 'POST',
      headers: { origin: 'https://evil.example', 'content-type': 'application/x-www-form-urlencoded' },
      body: 'action=pause',
    });
    expect(forged.status).toBe(403);
    const status = async () =>
      (
        await harness.db.query<{ status: string }>('SELECT status FROM assistant_operation WHERE id = $1', [
          operationId,
        ])
      )[0]?.status;
    expect(await status()).toBe('active');

    const press = (action: string) =>
      admin(`/admin/operations/${operationId}/${action}`, {
        method: 'POST',
        headers: {
          origin: harness.url,
          referer: `${harness.url}/admin/operations`,
          'content-type': 'application/x-www-form-urlencoded',
        },
        body: `action=${action}`,
      });
    const paused = await press('pause');
    expect(paused.status).toBe(303);
    expect(paused.headers.get('location')).toBe('/admin/operations');
    expect(await status()).toBe('paused');
    expect((await press('resume')).status).toBe(303);
    expect(await status()).toBe('active');
    expect((await press('cancel')).status).toBe(303);
    expect(await status()).toBe('cancelled');

    const events = await harness.db.query<{ kind: string; actor: string }>(
      `SELECT kind, actor FROM operation_event WHERE operation_id = $1 AND kind IN ('paused', 'resumed', 'cancelled') ORDER BY id`,
      [operationId],
    );
    expect(events).toEqual([
      { kind: 'paused', actor: 'operator:admin' },
      { kind: 'resumed', actor: 'operator:admin' },
      { kind: 'cancelled', actor: 'operator:admin' },
    ]);
  });
});
