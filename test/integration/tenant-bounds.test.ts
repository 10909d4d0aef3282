/**
 * What a tenant may accumulate is bounded, through the public API: notes per scope (an
 * execution's, the conversation's own, its persistent ones) and the bytes one read of them
 * answers (a page, with the `after` of the next). Each bound is reached and refused while another
 * organization's `/healthz` and `progress` answer as usual.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, type HttpResult, ids, startHarness, type Tenant } from '../helpers/harness.ts';

const MAX_NOTES = 5;
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
      env: { OPSPAD_MAX_NOTES_PER_SCOPE: String(MAX_NOTES), OPSPAD_MAX_READ_BYTES: String(READ_BYTES) },
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
});
