/**
 * An organization's fair-share weight and key-limit overrides, as the operator sets and reads
 * them: the store's `keyLimitOverride` (the key's own row, else the every-key row, figure by
 * figure), `PUT`/`GET /admin/organizations/:name/limits`, `opspad orgs limits` (direct and through
 * the embedded database's control socket), the operator view; bad input is a 400 naming the field and changes nothing; read-only mode refuses; one
 * organization's overrides are never shown or applied to another.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type KeyCommand, keyCommandViaLocalControl, listenLocalControl } from '../../src/cli/local-control.ts';
import { createApiKey, keyLimitOverride, organizationLimits } from '../../src/store/index.ts';
import { fileDatabaseUrl } from '../helpers/file-database.ts';
import { type Harness, openTestDatabase, startHarness, type Tenant } from '../helpers/harness.ts';
import { killAllChildren, RUN_TIMEOUT_MS, runOpspad } from '../helpers/processes.ts';

describe('organization limit overrides', () => {
  let harness: Harness;
  let readOnly: Harness;

  beforeAll(async () => {
    harness = await startHarness('postgres');
    readOnly = await startHarness('postgres', { env: { OPSPAD_ADMIN_READONLY: 'true' } });
  });
  afterAll(async () => {
    killAllChildren();
    await harness?.close();
    await readOnly?.close();
  });

  const limitsOf = (on: Harness, organization: string, init: RequestInit = {}) =>
    on.request(`/admin/organizations/${encodeURIComponent(organization)}/limits`, {
      ...init,
      headers: { authorization: on.adminAuthorization, 'content-type': 'application/json' },
    });
  const put = (organization: string, body: unknown, on = harness) =>
    limitsOf(on, organization, { method: 'PUT', body: JSON.stringify(body) });
  async function nameOf(tenant: Tenant): Promise<string> {
    const [row] = await harness.db.query<{ name: string }>('SELECT name FROM organization WHERE id = $1', [
      tenant.organizationId,
    ]);
    return row?.name as string;
  }
  const keyLimitRows = async (tenant: Tenant) =>
    harness.db.query(
      `SELECT operation_type, limit_key, rate_max, rate_interval_ms, concurrency FROM organization_key_limit
       WHERE organization_id = $1 ORDER BY operation_type, limit_key`,
      [tenant.organizationId],
    );
  const weightRow = async (tenant: Tenant) =>
    (
      await harness.db.query<{ w: number | null }>(
        'SELECT fair_share_weight AS w FROM organization_quota WHERE organization_id = $1',
        [tenant.organizationId],
      )
    )[0]?.w ?? null;

  it('keyLimitOverride: the key’s own figures, else the every-key row’s, else none', async () => {
    const tenant = await harness.newTenant();
    const other = await harness.newTenant();
    const name = await nameOf(tenant);
    const defaults = { maxStoredItems: 100, maxOpenOperations: 10 };
    await organizationLimits(
      harness.db,
      name,
      {
        key_limits: [
          { operation_type: 'send_sms', key: null, rate: { max: 10, interval_ms: 1000 }, concurrency: 4 },
          { operation_type: 'send_sms', key: 'acct-1', concurrency: 2 },
          { operation_type: 'send_sms', key: 'acct-2', rate: { max: 1, interval_ms: 500 } },
        ],
      },
      defaults,
    );
    const override = (key: string, type = 'send_sms', org = tenant.organizationId) =>
      keyLimitOverride(harness.db, org, type, key);
    // The key's own concurrency; its rate falls through to the every-key row.
    expect(await override('acct-1')).toEqual({ rate: { max: 10, intervalMs: 1000 }, concurrency: 2 });
    expect(await override('acct-2')).toEqual({ rate: { max: 1, intervalMs: 500 }, concurrency: 4 });
    // A key without a row of its own: the every-key row.
    expect(await override('acct-9')).toEqual({ rate: { max: 10, intervalMs: 1000 }, concurrency: 4 });
    // Another type, another organization: nothing (the handler's own figures).
    expect(await override('acct-1', 'post')).toBeUndefined();
    expect(await override('acct-1', 'send_sms', other.organizationId)).toBeUndefined();

    // Only a key's own row: the figures it leaves null are the handler's.
    await organizationLimits(
      harness.db,
      name,
      { key_limits: [{ operation_type: 'send_sms', key: null, rate: null, concurrency: null }] },
      defaults,
    );
    expect(await override('acct-1')).toEqual({ concurrency: 2 });
    expect(await override('acct-9')).toBeUndefined();
    expect(await keyLimitRows(tenant)).toHaveLength(2);
  });

  it('GET and PUT round-trip the weight and the key-limit overrides; null clears, an empty override is removed', async () => {
    const tenant = await harness.newTenant();
    const name = await nameOf(tenant);
    const initial = await limitsOf(harness, name);
    expect(initial.status).toBe(200);
    expect(initial.body).toMatchObject({ fair_share_weight: null, key_limits: [] });

    const set = await put(name, {
      fair_share_weight: 3,
      key_limits: [
        { operation_type: 'send_sms', key: null, rate: { max: 10, interval_ms: 1000 } },
        { operation_type: 'send_sms', key: 'acct-1', concurrency: 2 },
      ],
    });
    expect(set.status, JSON.stringify(set.body)).toBe(200);
    const expected = {
      fair_share_weight: 3,
      key_limits: [
        { operation_type: 'send_sms', key: null, rate: { max: 10, interval_ms: 1000 }, concurrency: null },
        { operation_type: 'send_sms', key: 'acct-1', rate: null, concurrency: 2 },
      ],
    };
    expect(set.body).toMatchObject(expected);
    expect((await limitsOf(harness, name)).body).toMatchObject(expected);
    expect(await weightRow(tenant)).toBe(3);

    // A change leaves what it does not name; null clears one figure; a row left empty goes.
    const changed = await put(name, {
      key_limits: [
        { operation_type: 'send_sms', key: 'acct-1', rate: { max: 5, interval_ms: 60_000 } },
        { operation_type: 'send_sms', key: null, rate: null },
      ],
    });
    expect(changed.status, JSON.stringify(changed.body)).toBe(200);
    expect(changed.body).toMatchObject({
      fair_share_weight: 3,
      key_limits: [
        { operation_type: 'send_sms', key: 'acct-1', rate: { max: 5, interval_ms: 60_000 }, concurrency: 2 },
      ],
    });
    const cleared = await put(name, { fair_share_weight: null });
    expect(cleared.body).toMatchObject({ fair_share_weight: null });
    expect(await weightRow(tenant)).toBeNull();
    expect(await keyLimitRows(tenant)).toHaveLength(1);

    // No key: every key of the type.
    const everyKey = await put(name, { key_limits: [{ operation_type: 'post', concurrency: 1 }] });
    expect(everyKey.status, JSON.stringify(everyKey.body)).toBe(200);
    expect(await keyLimitOverride(harness.db, tenant.organizationId, 'post', 'any')).toEqual({ concurrency: 1 });
  });

  it.each([
    ['a weight of 0', { fair_share_weight: 0 }, 'fair_share_weight'],
    ['a weight of 101', { fair_share_weight: 101 }, 'fair_share_weight'],
    ['a weight of 2.5', { fair_share_weight: 2.5 }, 'fair_share_weight'],
    ['a rate of "abc"', { key_limits: [{ operation_type: 'send_sms', key: null, rate: 'abc' }] }, 'key_limits[0].rate'],
    [
      'a rate max of 0',
      { key_limits: [{ operation_type: 'send_sms', key: null, rate: { max: 0, interval_ms: 1000 } }] },
      'key_limits[0].rate.max',
    ],
    [
      'an interval over an hour',
      { key_limits: [{ operation_type: 'send_sms', key: null, rate: { max: 1, interval_ms: 3_600_001 } }] },
      'key_limits[0].rate.interval_ms',
    ],
    [
      'a concurrency of 100,001',
      { key_limits: [{ operation_type: 'send_sms', key: null, concurrency: 100_001 }] },
      'key_limits[0].concurrency',
    ],
    [
      'a key with a line break',
      { key_limits: [{ operation_type: 'send_sms', key: 'acct\r\nX-Injected: 1', concurrency: 1 }] },
      'key_limits[0].key',
    ],
    [
      'an operation type with an escape',
      { key_limits: [{ operation_type: 'send\u001b[31m', key: null, concurrency: 1 }] },
      'key_limits[0].operation_type',
    ],
    [
      'the same override twice',
      {
        key_limits: [
          { operation_type: 'send_sms', key: 'a', concurrency: 1 },
          { operation_type: 'send_sms', key: 'a', concurrency: 2 },
        ],
      },
      'key_limits[1]',
    ],
  ])('refuses %s with a 400 naming the field, changing nothing', async (_what, body, field) => {
    const tenant = await harness.newTenant();
    const name = await nameOf(tenant);
    expect((await put(name, { fair_share_weight: 2 })).status).toBe(200);
    const refused = await put(name, { ...body, max_open_operations: 5 });
    expect(refused.status, JSON.stringify(refused.body)).toBe(400);
    const issues = (refused.body as { error: { details: { issues: { field: string }[] } } }).error.details.issues;
    expect(issues.map((issue) => issue.field)).toContain(field);
    expect(await weightRow(tenant)).toBe(2);
    expect(await keyLimitRows(tenant)).toEqual([]);
    expect((await limitsOf(harness, name)).body).toMatchObject({ max_open_operations: null, fair_share_weight: 2 });
  });

  it('refuses every change in read-only mode, still showing the overrides', async () => {
    const tenant = await harness.newTenant();
    const name = await nameOf(tenant);
    expect((await put(name, { fair_share_weight: 4 })).status).toBe(200);
    const refused = await put(
      name,
      { fair_share_weight: 7, key_limits: [{ operation_type: 'send_sms', key: null, concurrency: 1 }] },
      readOnly,
    );
    expect(refused.status).toBe(403);
    expect(await weightRow(tenant)).toBe(4);
    expect(await keyLimitRows(tenant)).toEqual([]);
    expect((await limitsOf(readOnly, name)).body).toMatchObject({ fair_share_weight: 4, key_limits: [] });
  });

  it("never shows or applies one organization's overrides to another", async () => {
    const a = await harness.newTenant();
    const b = await harness.newTenant();
    const [nameA, nameB] = [await nameOf(a), await nameOf(b)];
    expect(
      (
        await put(nameA, {
          fair_share_weight: 9,
          key_limits: [{ operation_type: 'send_sms', key: 'shared-key', concurrency: 3 }],
        })
      ).status,
    ).toBe(200);
    expect((await limitsOf(harness, nameB)).body).toMatchObject({ fair_share_weight: null, key_limits: [] });
    expect(await keyLimitOverride(harness.db, b.organizationId, 'send_sms', 'shared-key')).toBeUndefined();
    expect(await keyLimitOverride(harness.db, a.organizationId, 'send_sms', 'shared-key')).toEqual({ concurrency: 3 });
    const page = await fetch(`${harness.url}/admin/operations?org=${encodeURIComponent(nameB)}`, {
      headers: { authorization: harness.adminAuthorization },
    });
    const html = await page.text();
    expect(page.status).toBe(200);
    expect(html).toContain('Fair-share weight: <b>1 (default)</b>');
    expect(html).not.toContain('shared-key');
  });

  it('shows the weight and the overrides on the operator view, escaped', async () => {
    const tenant = await harness.newTenant();
    const name = await nameOf(tenant);
    expect(
      (
        await put(name, {
          fair_share_weight: 5,
          key_limits: [{ operation_type: 'send_sms', key: '<b>acct</b>', rate: { max: 1000, interval_ms: 60_000 } }],
        })
      ).status,
    ).toBe(200);
    const response = await fetch(`${harness.url}/admin/operations?org=${encodeURIComponent(name)}`, {
      headers: { authorization: harness.adminAuthorization },
    });
    const html = await response.text();
    expect(response.status).toBe(200);
    expect(html).toContain('Fair-share weight: <b>5 (set for it)</b>');
    expect(html).toContain('key <code>&#60;b&#62;acct&#60;/b&#62;</code>: rate 1,000 per 60,000 ms');
    expect(html).not.toContain('<b>acct</b>');
  });

  it('shows and sets the weight and key-limit overrides with opspad orgs limits', async () => {
    const tenant = await harness.newTenant();
    const name = await nameOf(tenant);
    const env = { DATABASE_URL: fileDatabaseUrl(), OPSPAD_LOG_LEVEL: 'warn' };
    const run = (args: string[]) =>
      runOpspad(['orgs', 'limits', '--org', name, ...args], env, { timeoutMs: RUN_TIMEOUT_MS });

    const set = await run([
      '--weight',
      '3',
      '--handler',
      'send_sms',
      '--rate',
      '10/1s',
      '--concurrency',
      '4',
      '--json',
    ]);
    expect(set.code, set.stderr).toBe(0);
    expect(JSON.parse(set.stdout)).toMatchObject({
      fair_share_weight: 3,
      key_limits: [{ operation_type: 'send_sms', key: null, rate: { max: 10, interval_ms: 1000 }, concurrency: 4 }],
    });
    const keyed = await run(['--handler', 'send_sms', '--key', 'acct-1', '--rate', '5/500ms']);
    expect(keyed.code, keyed.stderr).toBe(0);
    expect(keyed.stdout).toContain('Fair share:      weight 3 (set for this organization)');
    expect(keyed.stdout).toContain('send_sms, every key: rate 10 per 1000 ms, concurrency 4');
    expect(keyed.stdout).toContain(`send_sms, key "acct-1": rate 5 per 500 ms, concurrency the handler's own`);
    expect(await keyLimitOverride(harness.db, tenant.organizationId, 'send_sms', 'acct-1')).toEqual({
      rate: { max: 5, intervalMs: 500 },
      concurrency: 4,
    });

    const cleared = await run([
      '--weight',
      'default',
      '--handler',
      'send_sms',
      '--rate',
      'default',
      '--concurrency',
      'default',
    ]);
    expect(cleared.code, cleared.stderr).toBe(0);
    expect(cleared.stdout).toContain('Fair share:      weight 1 (the default)');
    expect(cleared.stdout).not.toContain('every key');
    expect(await weightRow(tenant)).toBeNull();
    expect(await keyLimitRows(tenant)).toHaveLength(1);

    for (const [args, message] of [
      [['--weight', '0'], '--weight'],
      [['--weight', '101'], '--weight'],
      [['--handler', 'send_sms', '--rate', 'abc'], '--rate'],
      [['--handler', 'send_sms', '--rate', '10/2h'], '--rate'],
      [['--handler', 'send_sms', '--concurrency', '100001'], '--concurrency'],
      [['--rate', '10/1s'], '--handler'],
      [['--handler', 'send_sms', '--key', 'a\tb', '--concurrency', '1'], '--key'],
      [['--handler', 'send_sms', '--key', '', '--concurrency', '1'], '--key is empty'],
    ] as const) {
      const refused = await run([...args]);
      expect(refused.code, args.join(' ')).not.toBe(0);
      expect(refused.stderr, args.join(' ')).toContain(message);
    }
    expect(await keyLimitRows(tenant)).toHaveLength(1);
    expect(await weightRow(tenant)).toBeNull();
  });
});

describe('organization limit overrides through the control socket (the CLI beside a service on the embedded database)', () => {
  it('sets and shows the weight and key-limit overrides in the process that holds the database', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'opspad-control-'));
    const db = await openTestDatabase('pglite');
    const control = await listenLocalControl(dataDir, db);
    try {
      const { organization_id } = await createApiKey(db, 'acme');
      const command: KeyCommand = {
        op: 'org_limits',
        org: 'acme',
        set: {
          fair_share_weight: 2,
          key_limits: [{ operation_type: 'send_sms', key: 'acct-1', rate: { max: 3, interval_ms: 1000 } }],
        },
        defaults: { maxStoredItems: 100, maxOpenOperations: 10 },
      };
      const shown = (await keyCommandViaLocalControl(dataDir, command))?.result;
      expect(shown).toMatchObject({
        fair_share_weight: 2,
        key_limits: [
          { operation_type: 'send_sms', key: 'acct-1', rate: { max: 3, interval_ms: 1000 }, concurrency: null },
        ],
      });
      expect(await keyLimitOverride(db, organization_id, 'send_sms', 'acct-1')).toEqual({
        rate: { max: 3, intervalMs: 1000 },
      });
      await expect(
        keyCommandViaLocalControl(dataDir, { ...command, set: { fair_share_weight: 101 } } as unknown as KeyCommand),
      ).rejects.toThrow(/refused/);
    } finally {
      await new Promise((resolve) => control.close(resolve));
      await db.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
