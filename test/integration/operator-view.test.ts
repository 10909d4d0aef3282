/**
 * The operator view at /admin/operations: behind basic auth, every organization's operations;
 * search by operation, item, conversation and organization; honest keyset paging; one statement
 * per list page whatever its rows; pace, abandoned and in-flight counts; failures grouped by
 * reason; the audit trail; a confirmation before Cancel; live rows and audit entries over its
 * stream — and everything a tenant wrote escaped, on every page and in the stream.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, ids, startHarness, type Tenant } from '../helpers/harness.ts';
import { openEventStream } from '../helpers/sse.ts';

/** Strings a tenant may write, each of which would run or break out if not escaped. */
const HOSTILE = {
  type: '<script>alert(1)</script>',
  item: '"><img src=x onerror=alert(2)>',
  reason: '</td></tr><script>alert(3)</script>',
  notes: "<iframe src='//evil.example'></iframe>",
  org: '<svg onload=alert(5)>',
};
/** The markup that would appear if any of them went through unescaped. */
const RAW = ['<script>alert', '<img src=x', '<iframe', '<svg onload'];

function expectEscaped(html: string, label: string) {
  for (const raw of RAW) {
    expect(html, `${label}: ${raw}`).not.toContain(raw);
  }
}

describe('the operator view (postgres)', () => {
  let harness: Harness;
  let tenant: Tenant;
  let orgName: string;
  let hostileId: string;
  const conversation = randomUUID();

  const admin = (path: string, init: RequestInit = {}) =>
    fetch(`${harness.url}${path}`, {
      ...init,
      redirect: 'manual',
      headers: { authorization: harness.adminAuthorization, ...(init.headers as Record<string, string>) },
    });
  const html = async (path: string) => {
    const response = await admin(path);
    expect(response.status, path).toBe(200);
    return response.text();
  };
  const sameOrigin = () => ({
    origin: harness.url,
    referer: `${harness.url}/admin/operations`,
    'content-type': 'application/x-www-form-urlencoded',
  });
  const statusOf = async (id: string) =>
    (await harness.db.query<{ status: string }>('SELECT status FROM assistant_operation WHERE id = $1', [id]))[0]
      ?.status;

  beforeAll(async () => {
    harness = await startHarness('postgres');
    tenant = await harness.newTenant();
    // The organization's name is the tenant's too (chosen at sign-up): hostile as well.
    orgName = `${HOSTILE.org}-${randomUUID().slice(0, 8)}`;
    await harness.db.query('UPDATE organization SET name = $2 WHERE id = $1', [tenant.organizationId, orgName]);
    const created = await tenant.op(conversation, {
      action: 'create',
      operation_type: HOSTILE.type,
      total_items: 4,
      item_ids: [HOSTILE.item, 'contact-2', 'contact-3', 'contact-4'],
      notes: HOSTILE.notes,
    });
    hostileId = created.body.operation_id as string;
    await tenant.op(conversation, {
      action: 'update',
      operation_id: hostileId,
      completed_ids: ['contact-2'],
      failed: [{ id: HOSTILE.item, reason: HOSTILE.reason }],
    });
  });
  afterAll(async () => {
    await harness?.close();
  });

  it('needs the operator credentials, for the pages, the stream and the script', async () => {
    for (const path of [
      '/admin/operations',
      `/admin/operations/${hostileId}`,
      `/admin/operations/${hostileId}/cancel`,
      `/admin/operations/stream?ids=${hostileId}`,
      '/admin/operations/assets/operator-view.js',
    ]) {
      expect((await fetch(`${harness.url}${path}`)).status, path).toBe(401);
      const withApiKey = await fetch(`${harness.url}${path}`, {
        headers: { authorization: `Bearer ${tenant.apiKey}` },
      });
      expect(withApiKey.status, path).toBe(401);
    }
  });

  it('escapes everything a tenant wrote, on the list, the operation, the Cancel page and the stream', async () => {
    await tenant.op(conversation, { action: 'pause', operation_id: hostileId });
    const list = await html(`/admin/operations?q=${tenant.organizationId}`);
    expect(list).toContain(`data-operation-id="${hostileId}"`);
    expect(list).toContain('&#60;script&#62;alert(1)&#60;/script&#62;');
    expect(list).toContain('&#60;svg onload=alert(5)&#62;');
    expect(list).toContain('&#34;&#62;&#60;img src=x onerror=alert(2)&#62;');
    expect(list).toContain('&#60;/td&#62;&#60;/tr&#62;&#60;script&#62;alert(3)&#60;/script&#62;');
    expectEscaped(list, 'list');

    const detail = await html(`/admin/operations/${hostileId}?item=${encodeURIComponent(HOSTILE.item)}`);
    expect(detail).toContain('&#60;iframe src=&#39;//evil.example&#39;&#62;&#60;/iframe&#62;');
    expectEscaped(detail, 'detail');
    expectEscaped(await html(`/admin/operations/${hostileId}/cancel`), 'cancel page');
    // A search echoed back into the form.
    expectEscaped(await html(`/admin/operations?q=${encodeURIComponent(HOSTILE.type)}`), 'search');

    const stream = await openEventStream(`${harness.url}/admin/operations/stream?ids=${hostileId}&audit_after=0`, '', {
      authorization: harness.adminAuthorization,
    });
    const row = await stream.until((f) => f.event === 'row');
    const audit = await stream.until((f) => f.event === 'audit' && f.data.includes('paused'));
    await stream.close();
    expectEscaped(JSON.parse(row.data).html, 'stream row');
    expectEscaped(JSON.parse(audit.data).html, 'stream audit entry');
    await tenant.op(conversation, { action: 'resume', operation_id: hostileId });
  });

  it('finds operations by operation id, item id, conversation id and organization', async () => {
    const other = await harness.newTenant();
    const otherConversation = randomUUID();
    const made = await other.op(otherConversation, {
      action: 'create',
      operation_type: 'follow_up',
      total_items: 3,
      item_ids: ['lead-a', 'lead-b', 'needle-item'],
    });
    const id = made.body.operation_id as string;
    const found = async (q: string) => {
      const page = await html(`/admin/operations?q=${encodeURIComponent(q)}`);
      return [...page.matchAll(/data-operation-id="([^"]+)"/g)].map((m) => m[1]);
    };
    expect(await found(id.toUpperCase())).toEqual([id]);
    expect(await found('needle-item')).toEqual([id]);
    expect(await found(otherConversation)).toEqual([id]);
    expect(await found(other.organizationId)).toEqual([id]);
    const orgRow = await harness.db.query<{ name: string }>('SELECT name FROM organization WHERE id = $1', [
      other.organizationId,
    ]);
    expect(await found(orgRow[0]?.name.slice(4, 20) ?? '')).toEqual([id]);
    // Wildcards are what the operator typed, not patterns.
    expect(await found('%')).toEqual([]);
    expect(await html(`/admin/operations?q=${randomUUID()}`)).toContain('No operation matches.');
    // Filters combine: the status and the type narrow the search.
    expect(await found(id)).toEqual([id]);
    expect((await html(`/admin/operations?q=${id}&status=paused`)).includes(`data-operation-id="${id}"`)).toBe(false);
    expect((await html(`/admin/operations?q=${id}&type=follow_up`)).includes(`data-operation-id="${id}"`)).toBe(true);
  });

  it('filters by when operations were created, and its bulk buttons act on exactly that', async () => {
    const other = await harness.newTenant();
    const org = (
      await harness.db.query<{ name: string }>('SELECT name FROM organization WHERE id = $1', [other.organizationId])
    )[0]?.name as string;
    const make = async () =>
      (
        await other.op(randomUUID(), {
          action: 'create',
          operation_type: 'dated',
          total_items: 1,
          item_ids: ['x'],
        })
      ).body.operation_id as string;
    const older = await make();
    const [row] = await harness.db.query<{ at: string }>(
      'SELECT created_at::text AS at FROM assistant_operation WHERE id = $1',
      [older],
    );
    const between = new Date(new Date(row?.at as string).getTime() + 1).toISOString();
    await harness.db.query("UPDATE assistant_operation SET created_at = created_at - interval '1 hour' WHERE id = $1", [
      older,
    ]);
    const newer = await make();
    const shown = async (filter: string) => {
      const page = await html(`/admin/operations?org=${encodeURIComponent(org)}&${filter}`);
      return { ids: [...page.matchAll(/data-operation-id="([^"]+)"/g)].map((m) => m[1]), page };
    };
    const after = await shown(`created_after=${encodeURIComponent(between)}`);
    expect(after.ids).toEqual([newer]);
    // The bulk buttons carry the bound, so the action takes what the list shows.
    expect(after.page).toContain('all 1 matching');
    expect(after.page).toContain(`created_after=${encodeURIComponent(between)}`);
    expect((await shown(`created_before=${encodeURIComponent(between)}`)).ids).toEqual([older]);
    expect((await shown('created_after=')).ids.sort()).toEqual([older, newer].sort());
    const bad = await admin(`/admin/operations?created_after=yesterday`);
    expect(bad.status).toBe(400);
    expect(await bad.text()).toContain('created_after');
    // ISO times Postgres's timestamptz refuses: a 400 naming the field, not the statement's 500.
    for (const [query, says] of [
      ['created_before=0000-01-01T00:00:00Z', 'created_before: has year 0000'],
      [`created_after=${encodeURIComponent('2026-01-01T00:00:00+16:00')}`, 'created_after: has an offset of 16 hours'],
    ]) {
      const refused = await admin(`/admin/operations?${query}`);
      expect(refused.status, query).toBe(400);
      expect(await refused.text()).toContain(says);
    }
  });

  it('pages honestly: how many, where, newer and older, in an order that status changes do not move', async () => {
    const pager = await harness.newTenant();
    const made: string[] = [];
    for (let i = 0; i < 5; i++) {
      const created = await pager.op(randomUUID(), {
        action: 'create',
        operation_type: `paged_${i}`,
        total_items: 1,
        item_ids: ['x'],
      });
      made.push(created.body.operation_id as string);
    }
    const newestFirst = [...made].reverse();
    const rowsOf = (page: string) => [...page.matchAll(/data-operation-id="([^"]+)"/g)].map((m) => m[1]);
    const q = `q=${pager.organizationId}&limit=2`;

    const first = await html(`/admin/operations?${q}`);
    expect(first).toContain('Showing 1–2 of 5');
    expect(rowsOf(first)).toEqual(newestFirst.slice(0, 2));
    expect(first).not.toContain('rel="prev"');
    // Pausing the newest (a status change) does not move it.
    await pager.op(randomUUID(), { action: 'create', operation_type: 'ignored', total_items: 1, item_ids: ['y'] });
    await harness.db.query(`UPDATE assistant_operation SET status = 'paused' WHERE id = $1`, [newestFirst[0]]);
    const older = /rel="next" href="([^"]+)"/.exec(first)?.[1]?.replaceAll('&amp;', '&');
    expect(older).toContain(`older_than=${newestFirst[1]}`);

    // The next page starts after the last row shown, whatever arrived since: the count and the
    // positions say where it is now.
    const second = await html(older ?? '');
    expect(second).toContain('Showing 4–5 of 6');
    expect(rowsOf(second)).toEqual(newestFirst.slice(2, 4));
    const third = await html(/rel="next" href="([^"]+)"/.exec(second)?.[1]?.replaceAll('&amp;', '&') ?? '');
    expect(third).toContain('Showing 6–6 of 6');
    expect(rowsOf(third)).toEqual(newestFirst.slice(4));
    expect(third).not.toContain('rel="next"');
    const back = await html(/rel="prev" href="([^"]+)"/.exec(second)?.[1]?.replaceAll('&amp;', '&') ?? '');
    expect(rowsOf(back)).toEqual(newestFirst.slice(0, 2));
    expect(back).toContain('Showing 2–3 of 6');

    // The anchor left the filter (it was paused): the next page still counts right.
    const active = await html(`/admin/operations?${q}&status=active`);
    expect(active).toContain('Showing 1–2 of 5');
    const [, second_] = rowsOf(active);
    await harness.db.query(`UPDATE assistant_operation SET status = 'paused' WHERE id = $1`, [second_]);
    const afterPause = await html(`/admin/operations?${q}&status=active&older_than=${second_}`);
    expect(afterPause).toContain('Showing 2–3 of 4');

    expect(await html(`/admin/operations?${q}&older_than=${randomUUID()}`)).toContain('Nothing on this page');
    const bad = await admin(`/admin/operations?limit=1000&older_than=${made[0]}&newer_than=${made[1]}`);
    expect(bad.status).toBe(400);
    const error = (await bad.json()) as { error: { message: string } };
    expect(error.error.message).toMatch(/limit: must be at most 100 rows/);
    expect(error.error.message).toMatch(/older_than or newer_than, not both/);
  });

  it('reads one statement per list page and four per operation page, whatever the rows', async () => {
    const many = await harness.newTenant();
    for (let i = 0; i < 12; i++) {
      const conv = randomUUID();
      const created = await many.op(conv, {
        action: 'create',
        operation_type: 'counted',
        total_items: 3,
        item_ids: ids(3),
      });
      await many.op(conv, {
        action: 'update',
        operation_id: created.body.operation_id,
        completed_ids: ['contact-1'],
        failed: [{ id: 'contact-2', reason: 'no' }],
      });
    }
    // The pages' own statements, sent from their routes: the handle is shared with the bulk-action
    // sweep and with a live stream's polls (an earlier test's, ending), which may run meanwhile.
    const statements: string[] = [];
    const query = harness.db.query.bind(harness.db);
    harness.db.query = ((text: string, params?: readonly unknown[]) => {
      const stack = new Error().stack ?? '';
      if (stack.includes('admin-operations.ts') && !stack.includes('operator-view/stream.ts')) {
        statements.push(text);
      }
      return query(text, params);
    }) as typeof harness.db.query;
    const counted = async (path: string) => {
      statements.length = 0;
      const page = await html(path);
      return { page, statements: [...statements] };
    };
    try {
      const two = await counted(`/admin/operations?q=${many.organizationId}&limit=2`);
      const twelve = await counted(`/admin/operations?q=${many.organizationId}&limit=12`);
      expect(two.page).toContain('Showing 1–2 of 12');
      expect(twelve.page).toContain('Showing 1–12 of 12');
      expect(two.statements).toHaveLength(1);
      expect(twelve.statements).toHaveLength(1);
      expect(twelve.statements[0]).toContain('operator view: operations page');
      const detail = await counted(`/admin/operations/${hostileId}`);
      expect(detail.statements).toHaveLength(4);
    } finally {
      harness.db.query = query;
    }
  });

  it('shows pace, in-flight and abandoned counts, failures grouped by reason, and who did what', async () => {
    const conv = randomUUID();
    const itemIds = ids(60, 'item');
    const created = await tenant.op(conv, {
      action: 'create',
      operation_type: 'grouped',
      total_items: 60,
      item_ids: itemIds,
      batch_size: 10,
    });
    const id = created.body.operation_id as string;
    // 25 reasons: 20 items fail "timeout", 24 others one each; 5 items in flight.
    const failed = [
      ...itemIds.slice(0, 20).map((item) => ({ id: item, reason: 'timeout' })),
      ...itemIds.slice(20, 44).map((item, i) => ({ id: item, reason: `HTTP 4${String(i).padStart(2, '0')}` })),
    ];
    await tenant.op(conv, { action: 'update', operation_id: id, completed_ids: itemIds.slice(44, 50), failed });
    await tenant.op(conv, { action: 'progress', operation_id: id });

    const list = await html(`/admin/operations?q=${id}`);
    expect(list).toMatch(/<span class="recorded">50<\/span>\/60 recorded/);
    expect(list).toMatch(/<span class="failed-count">44<\/span> failed · 10 in flight · 10 remaining/);
    expect(list).toMatch(/<span class="pace">[\d.,]+\/(s|min)<\/span> <span class="muted eta">ETA /);
    expect(list).toContain('assistant');

    const detail = await html(`/admin/operations/${id}`);
    expect(detail).toContain('44 failed item(s), 25 reason(s).');
    expect(detail).toMatch(
      /<td class="reason">timeout<\/td><td class="group-count">20<\/td><td><a class="id" href="[^"]+\?item=item-1">item-1<\/a>, <a class="id" href="[^"]+\?item=item-2">item-2<\/a>, <a class="id" href="[^"]+\?item=item-3">item-3<\/a> …/,
    );
    expect(detail).toContain('Page 1 of 2');
    const second = await html(`/admin/operations/${id}?groups_page=2`);
    expect(second.match(/class="group-count"/g)).toHaveLength(5);
    expect(second).toContain('Page 2 of 2');
    // An example leads to its item: status, attempts, reason.
    expect(await html(`/admin/operations/${id}?item=item-1`)).toMatch(
      /<td class="id">item-1<\/td><td>#1<\/td><td>failed<\/td><td>\d+<\/td><td class="reason">timeout<\/td>/,
    );
    expect(await html(`/admin/operations/${id}?item=no-such-item`)).toContain('has no item no-such-item');
    const failures = await html(`/admin/operations/${id}?failures_after=41`);
    expect(failures).toContain('<td>42</td><td class="id">item-42</td>');
    expect(failures).not.toContain('<td class="id">item-41</td>');

    // A forced complete abandons the rest; the trail says who did it.
    await tenant.op(conv, { action: 'complete', operation_id: id, force: true });
    const done = await html(`/admin/operations/${id}`);
    expect(done).toContain('<span class="abandoned-count">10</span> abandoned');
    expect(done).toMatch(/took \d+/);
    expect(done).toMatch(
      /<td class="kind">completed<\/td><td class="actor">api_key:[^<]+<\/td><td>forced: true · abandoned: 10/,
    );
    expect(done).toMatch(/<td class="kind">created<\/td>/);
  });

  it('asks before cancelling, refuses a cancel without the confirmation, and pauses and resumes at once', async () => {
    const conv = randomUUID();
    const created = await tenant.op(conv, {
      action: 'create',
      operation_type: 'follow_up',
      total_items: 3,
      item_ids: ids(3),
    });
    const id = created.body.operation_id as string;
    const list = await html(`/admin/operations?q=${id}`);
    expect(list).toContain(`action="/admin/operations/${id}/pause"`);
    expect(list).toContain(`href="/admin/operations/${id}/cancel"`);
    expect(list).not.toContain(`action="/admin/operations/${id}/cancel"`);

    const forged = await admin(`/admin/operations/${id}/pause`, {
      method: 'POST',
      headers: { ...sameOrigin(), origin: 'https://evil.example' },
      body: 'action=pause',
    });
    expect(forged.status).toBe(403);
    expect(await statusOf(id)).toBe('active');

    const press = (action: string, body = `action=${action}`) =>
      admin(`/admin/operations/${id}/${action}`, { method: 'POST', headers: sameOrigin(), body });
    const paused = await press('pause');
    expect(paused.status).toBe(303);
    expect(paused.headers.get('location')).toBe('/admin/operations');
    expect(await statusOf(id)).toBe('paused');
    expect((await press('resume')).status).toBe(303);
    expect(await statusOf(id)).toBe('active');

    const confirm = await html(`/admin/operations/${id}/cancel`);
    expect(confirm).toContain('its <strong>3</strong> item(s) not recorded yet are abandoned');
    expect(confirm).toContain(`<form method="post" action="/admin/operations/${id}/cancel">`);
    const unconfirmed = await press('cancel');
    expect(unconfirmed.status).toBe(400);
    expect(((await unconfirmed.json()) as { error: { message: string } }).error.message).toContain('body.confirm');
    expect(await statusOf(id)).toBe('active');
    const cancelled = await press('cancel', 'action=cancel&confirm=yes');
    expect(cancelled.status).toBe(303);
    expect(cancelled.headers.get('location')).toBe(`/admin/operations/${id}`);
    expect(await statusOf(id)).toBe('cancelled');

    const trail = await html(`/admin/operations/${id}`);
    for (const kind of ['paused', 'resumed', 'cancelled']) {
      expect(trail).toMatch(new RegExp(`<td class="kind">${kind}</td><td class="actor">operator:admin</td>`));
    }
    expect(await html(`/admin/operations/${id}/cancel`)).toContain('It is already cancelled');
    expect((await admin(`/admin/operations/${randomUUID()}`)).status).toBe(404);
  });

  it('serves its script from the app, under a policy that allows nothing from elsewhere', async () => {
    const script = await admin('/admin/operations/assets/operator-view.js');
    expect(script.status).toBe(200);
    expect(script.headers.get('content-type')).toContain('text/javascript');
    expect(await script.text()).toContain("addEventListener('row'");
    const page = await admin('/admin/operations');
    const csp = page.headers.get('content-security-policy') ?? '';
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("connect-src 'self'");
    expect(csp).toContain("default-src 'none'");
    expect(await page.text()).toContain('<script src="/admin/operations/assets/operator-view.js" defer></script>');
  });
});
