/**
 * What a tenant may accumulate is bounded, through the public API: notes per scope (an
 * execution's, the conversation's own, its persistent ones), the bytes one read of them answers
 * (a page, with the `after` of the next), and each organization's quota of stored items and open
 * operations, which the admin API and `opspad orgs limits` override per organization. Each bound
 * is reached and refused while another organization's `/healthz` and `progress` answer as usual.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { fileDatabaseUrl } from '../helpers/file-database.ts';
import { type Harness, type HttpResult, ids, startHarness, type Tenant } from '../helpers/harness.ts';
import { killAllChildren, RUN_TIMEOUT_MS, runOpspad } from '../helpers/processes.ts';

const MAX_NOTES = 5;
const MAX_STORED_ITEMS = 10;
const MAX_OPEN = 3;
/** The smallest page allowed: three notes of 20,000 characters fit, a fourth does not. */
const READ_BYTES = 65_536;
const LONG_NOTE = (n: number) => `${n}:${'x'.repeat(19_990)}`;

interface NotesAnswer {
  result: string;
  note_count: number;
  next_after: number | null;
}

describe('tenant bounds (postgres)', () => {
  let harness: Harness;
  let other: Tenant;
  let otherConversation: string;

  beforeAll(async () => {
    harness = await startHarness('postgres', {
      env: {
        OPSPAD_MAX_NOTES_PER_SCOPE: String(MAX_NOTES),
        OPSPAD_MAX_READ_BYTES: String(READ_BYTES),
        OPSPAD_MAX_STORED_ITEMS: String(MAX_STORED_ITEMS),
        OPSPAD_MAX_OPEN_OPERATIONS: String(MAX_OPEN),
        OPSPAD_MAX_BODY_BYTES: String(2 * 1024 * 1024),
        OPSPAD_MAX_RUNNING_EXECUTIONS: '3',
      },
    });
    other = await harness.newTenant();
    otherConversation = randomUUID();
    const created = await other.op(otherConversation, {
      action: 'create',
      operation_type: 'notes',
      total_items: 3,
      item_ids: ids(3),
    });
    expect(created.status).toBe(200);
  });
  afterAll(async () => {
    await harness.close();
  });
  afterEach(killAllChildren);

  /** Another organization is served as usual. */
  async function othersAnswer(): Promise<void> {
    expect((await harness.request('/healthz')).status).toBe(200);
    const progress = await other.op(otherConversation, { action: 'progress' });
    expect(progress.status).toBe(200);
    expect(progress.body).toMatchObject({ total_items: 3 });
  }

  function expectFull(response: HttpResult<unknown>, scope: string, held: number): void {
    expect(response.status, JSON.stringify(response.body)).toBe(409);
    expect(response.body).toMatchObject({
      error: {
        code: 'too_many_notes',
        details: { scope, held, limit: { variable: 'OPSPAD_MAX_NOTES_PER_SCOPE', max: MAX_NOTES } },
      },
    });
    const { message } = (response.body as { error: { message: string } }).error;
    expect(message).toContain(`OPSPAD_MAX_NOTES_PER_SCOPE = ${MAX_NOTES}`);
  }

  const write = (tenant: Tenant, conversation: string, notes: string, headers: Record<string, string> = {}) =>
    tenant.tool<NotesAnswer>(conversation, { notes }, 'write_to_scratchpad', headers);
  const read = (tenant: Tenant, conversation: string, input: Record<string, unknown> = {}) =>
    tenant.tool<NotesAnswer>(conversation, input, 'read_from_scratchpad');

  it("refuses a note beyond the conversation's cap, writing nothing", async () => {
    const tenant = await harness.newTenant();
    const conversation = randomUUID();
    for (let n = 1; n <= MAX_NOTES; n++) {
      expect((await write(tenant, conversation, `note ${n}`)).status).toBe(200);
    }
    expectFull(await write(tenant, conversation, 'one too many'), 'conversation', MAX_NOTES);
    await othersAnswer();
    const all = await read(tenant, conversation);
    expect(all.body.note_count).toBe(MAX_NOTES);
    expect(all.body.result).not.toContain('one too many');
  });

  it("refuses a note beyond an execution's cap, and a persistent note beyond the conversation's", async () => {
    const tenant = await harness.newTenant();
    const conversation = randomUUID();
    const started = await tenant.post<{ execution_id: string }>(`/v1/conversations/${conversation}/executions`);
    const inExecution = { 'x-opspad-execution': started.body.execution_id };
    for (let n = 1; n <= MAX_NOTES; n++) {
      expect((await write(tenant, conversation, `step ${n}`, inExecution)).status).toBe(200);
    }
    expectFull(await write(tenant, conversation, 'step 6', inExecution), 'execution', MAX_NOTES);

    for (let n = 1; n <= MAX_NOTES; n++) {
      expect((await read(tenant, conversation, { persistent_notes: `rule ${n}` })).status).toBe(200);
    }
    expectFull(await read(tenant, conversation, { persistent_notes: 'rule 6' }), 'persistent', MAX_NOTES);
    // An identical note is no new note: still answered.
    expect((await read(tenant, conversation, { persistent_notes: 'rule 1' })).status).toBe(200);
    await othersAnswer();
  });

  it('refuses an execution beyond the running ones a conversation may have, until one ends', async () => {
    const tenant = await harness.newTenant();
    const conversation = randomUUID();
    const start = () => tenant.post<{ execution_id: string }>(`/v1/conversations/${conversation}/executions`);
    const started: string[] = [];
    for (let n = 0; n < 3; n++) {
      const response = await start();
      expect(response.status).toBe(201);
      started.push(response.body.execution_id);
    }
    const refused = await start();
    expect(refused.status).toBe(409);
    expect(refused.body).toMatchObject({
      error: {
        code: 'too_many_executions',
        details: { running: 3, limit: { variable: 'OPSPAD_MAX_RUNNING_EXECUTIONS', max: 3 } },
      },
    });
    await othersAnswer();
    expect((await tenant.post(`/v1/executions/${started[0]}/end`)).status).toBe(200);
    expect((await start()).status).toBe(201);
  });

  it('answers a read in pages of at most OPSPAD_MAX_READ_BYTES, and says how to ask for the next', async () => {
    const tenant = await harness.newTenant();
    const conversation = randomUUID();
    for (let n = 1; n <= MAX_NOTES; n++) {
      expect((await write(tenant, conversation, LONG_NOTE(n))).status).toBe(200);
    }
    const first = await read(tenant, conversation);
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({ note_count: MAX_NOTES, next_after: 3 });
    expect(Buffer.byteLength(first.body.result)).toBeLessThan(READ_BYTES + 1000);
    expect(first.body.result).toContain('{"after": 3}');
    expect(first.body.result).not.toContain(LONG_NOTE(4));
    await othersAnswer();

    const second = await read(tenant, conversation, { after: first.body.next_after });
    expect(second.body).toMatchObject({ note_count: MAX_NOTES, next_after: null });
    expect(second.body.result).toContain(LONG_NOTE(4));
    expect(second.body.result).toContain(LONG_NOTE(5));
    expect(second.body.result).not.toContain(LONG_NOTE(3));

    const history = await tenant.tool<NotesAnswer>(
      conversation,
      { notes: 'x', return_history: true },
      'write_to_scratchpad',
    );
    expect(history.status).toBe(409);
    const another = randomUUID();
    await write(tenant, another, LONG_NOTE(1));
    await write(tenant, another, LONG_NOTE(2));
    await write(tenant, another, LONG_NOTE(3));
    const withHistory = await tenant.tool<NotesAnswer>(
      another,
      { notes: LONG_NOTE(4), return_history: true },
      'write_to_scratchpad',
    );
    expect(withHistory.body).toMatchObject({ note_count: 4, next_after: 3 });
  });

  const create = (tenant: Tenant, conversation: string, items: number) =>
    tenant.op(conversation, { action: 'create', operation_type: 'notes', total_items: items, item_ids: ids(items) });
  const adminLimits = (organization: string, init: RequestInit = {}) =>
    harness.request(`/admin/organizations/${encodeURIComponent(organization)}/limits`, {
      ...init,
      headers: { authorization: harness.adminAuthorization, 'content-type': 'application/json' },
    });
  async function organizationName(tenant: Tenant): Promise<string> {
    const rows = await harness.db.query<{ name: string }>('SELECT name FROM organization WHERE id = $1', [
      tenant.organizationId,
    ]);
    return rows[0]?.name as string;
  }

  it('refuses a create past the stored-items quota, naming it; the admin API raises it for one organization', async () => {
    const tenant = await harness.newTenant();
    expect((await create(tenant, randomUUID(), 6)).status).toBe(200);
    const refusedIn = randomUUID();
    const refused = await create(tenant, refusedIn, 5);
    expect(refused.status, JSON.stringify(refused.body)).toBe(409);
    expect(refused.body).toMatchObject({
      error: {
        code: 'quota_exceeded',
        details: {
          quota: 'stored_items',
          used: 6,
          requested: 5,
          limit: MAX_STORED_ITEMS,
          setting: 'OPSPAD_MAX_STORED_ITEMS',
        },
      },
    });
    expect((refused.body as { error: { message: string } }).error.message).toContain('OPSPAD_MAX_STORED_ITEMS');
    const written = await harness.db.query('SELECT 1 FROM assistant_operation WHERE conversation_id = $1', [refusedIn]);
    expect(written).toEqual([]);
    await othersAnswer();

    const name = await organizationName(tenant);
    const raised = await adminLimits(name, { method: 'PUT', body: JSON.stringify({ max_stored_items: 20 }) });
    expect(raised.status, JSON.stringify(raised.body)).toBe(200);
    expect(raised.body).toMatchObject({ stored_items: 6, max_stored_items: 20, limits: { stored_items: 20 } });
    expect((await create(tenant, randomUUID(), 5)).status).toBe(200);
    expect((await adminLimits(name)).body).toMatchObject({ stored_items: 11, open_operations: 2 });
    const view = await fetch(`${harness.url}/admin/operations?org=${encodeURIComponent(name)}`, {
      headers: { authorization: harness.adminAuthorization },
    });
    expect(await view.text()).toContain('Quota: <b>11</b> of 20 stored items (set for it), <b>2</b> of 3 open');

    const bad = await adminLimits(name, { method: 'PUT', body: JSON.stringify({ max_stored_items: -1 }) });
    expect(bad.status).toBe(400);
    expect(JSON.stringify(bad.body)).toContain('max_stored_items');
    const unauthenticated = await harness.request(`/admin/organizations/${name}/limits`);
    expect(unauthenticated.status).toBe(401);
    expect((await adminLimits('no-such-organization')).status).toBe(404);
  });

  it('refuses a create past the open-operations quota until one finishes', async () => {
    const tenant = await harness.newTenant();
    const conversations = [randomUUID(), randomUUID(), randomUUID()];
    for (const conversation of conversations) {
      expect((await create(tenant, conversation, 1)).status).toBe(200);
    }
    const refused = await create(tenant, randomUUID(), 1);
    expect(refused.status).toBe(409);
    expect(refused.body).toMatchObject({
      error: {
        code: 'quota_exceeded',
        details: { quota: 'open_operations', used: MAX_OPEN, limit: MAX_OPEN, setting: 'OPSPAD_MAX_OPEN_OPERATIONS' },
      },
    });
    await othersAnswer();
    const first = conversations[0] as string;
    const operationId = (await tenant.op(first, { action: 'progress' })).body.operation_id as string;
    expect((await tenant.op(first, { action: 'cancel', operation_id: operationId })).status).toBe(200);
    expect((await create(tenant, randomUUID(), 1)).status).toBe(200);
  });

  it("shows and sets an organization's limits with opspad orgs limits", async () => {
    const tenant = await harness.newTenant();
    const name = await organizationName(tenant);
    const env = {
      DATABASE_URL: fileDatabaseUrl(),
      OPSPAD_LOG_LEVEL: 'warn',
      OPSPAD_MAX_STORED_ITEMS: '10',
      OPSPAD_MAX_OPEN_OPERATIONS: '3',
    };
    const set = await runOpspad(['orgs', 'limits', '--org', name, '--max-open-operations', '1', '--json'], env, {
      timeoutMs: RUN_TIMEOUT_MS,
    });
    expect(set.code, set.stderr).toBe(0);
    expect(JSON.parse(set.stdout)).toMatchObject({
      organization: name,
      max_open_operations: 1,
      limits: { stored_items: 10, open_operations: 1 },
    });
    expect((await create(tenant, randomUUID(), 1)).status).toBe(200);
    expect((await create(tenant, randomUUID(), 1)).body).toMatchObject({
      error: { code: 'quota_exceeded', details: { quota: 'open_operations', limit: 1, overridden: true } },
    });
    const reset = await runOpspad(['orgs', 'limits', '--org', name, '--max-open-operations', 'default'], env, {
      timeoutMs: RUN_TIMEOUT_MS,
    });
    expect(reset.code, reset.stderr).toBe(0);
    expect(reset.stdout).toContain('Open operations: 1 of 3');
  });

  it('refuses control characters in names with a 400 naming the field, writing nothing', async () => {
    const tenant = await harness.newTenant();
    const conversation = randomUUID();
    const forged = await tenant.op(conversation, {
      action: 'create',
      operation_type: 'send_sms\r\nX-Injected: 1',
      total_items: 1,
      item_ids: ['a'],
    });
    expect(forged.status).toBe(400);
    expect(JSON.stringify(forged.body)).toContain('operation_type');
    expect(JSON.stringify(forged.body)).toContain('control characters');
    expect(
      await harness.db.query('SELECT 1 FROM assistant_operation WHERE conversation_id = $1', [conversation]),
    ).toEqual([]);

    expect((await create(tenant, conversation, 2)).status).toBe(200);
    const owner = await tenant.op(conversation, { action: 'progress', lease_owner: 'worker\u001b[31m' });
    expect(owner.status).toBe(400);
    expect(JSON.stringify(owner.body)).toContain('lease_owner');

    const ref = await tenant.tool(
      conversation,
      { add: { refs: [{ id: 'crm:\u0000x', kind: 'tool_call' }] } },
      'update_scratchpad',
    );
    expect(ref.status).toBe(400);
    expect(JSON.stringify(ref.body)).toContain('refs');
    const admin = await adminLimits('acme\nforged');
    expect(admin.status).toBe(400);
    await othersAnswer();
  });

  it("names each route's own body limit and the variable it comes from in the 413", async () => {
    const tenant = await harness.newTenant();
    const conversation = randomUUID();
    const post = (tool: string, bytes: number) =>
      fetch(`${harness.url}/v1/conversations/${conversation}/tools/${tool}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${tenant.apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ notes: 'x'.repeat(bytes) }),
      });
    const note = await post('write_to_scratchpad', 1024 * 1024 + 10);
    expect(note.status).toBe(413);
    const noteError = ((await note.json()) as { error: { message: string; details: Record<string, unknown> } }).error;
    expect(noteError.message).toContain(
      "this route's limit of 1048576 bytes (the larger of 1 MiB and twice OPSPAD_MAX_SCRATCHPAD_BYTES (262144))",
    );
    expect(noteError.details).toMatchObject({ limit_bytes: 1048576, variable: 'OPSPAD_MAX_SCRATCHPAD_BYTES' });

    const create = await post('manage_assistant_operation', 2 * 1024 * 1024 + 10);
    expect(create.status).toBe(413);
    const createError = ((await create.json()) as { error: { message: string; details: Record<string, unknown> } })
      .error;
    expect(createError.message).toContain("this route's limit of 2097152 bytes (OPSPAD_MAX_BODY_BYTES)");
    expect(createError.details).toMatchObject({ limit_bytes: 2097152, variable: 'OPSPAD_MAX_BODY_BYTES' });
    await othersAnswer();
  });

  it('serves the API reference at /docs, and sends /docs/ there', async () => {
    const page = await fetch(`${harness.url}/docs`);
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('src="docs/assets/redoc.standalone.js"');
    const slash = await fetch(`${harness.url}/docs/`, { redirect: 'manual' });
    expect(slash.status).toBe(301);
    expect(new URL(slash.headers.get('location') ?? '', `${harness.url}/docs/`).pathname).toBe('/docs');
    const followed = await fetch(`${harness.url}/docs/`);
    expect(followed.url).toBe(`${harness.url}/docs`);
    expect(followed.status).toBe(200);
  });
});
