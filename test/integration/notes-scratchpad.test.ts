/**
 * The notes scratchpad over HTTP, on real Postgres and on PGlite: `write_to_scratchpad` and
 * `read_from_scratchpad` on the tools endpoint, scoped to an execution (`X-Opspad-Execution`)
 * or to the conversation; executions started and ended over REST (ending clears the
 * execution's notes and keeps the persistent ones); every read and write traced in order.
 * Unknown and foreign executions are 404, ended ones 409, bad input 400 writing nothing.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ENGINES, type Harness, type HttpResult, startHarness, type Tenant } from '../helpers/harness.ts';

interface ErrorResponse {
  error: { code: string; message: string; details: { issues?: { field: string; message: string }[] } & object };
}

interface NotesAnswer {
  result: string;
  scope: 'execution' | 'conversation';
  execution_id: string | null;
  note_count?: number;
  persistent_note_added?: boolean;
}

interface Trace {
  seq: number;
  kind: 'read' | 'write';
  notes?: string;
  at: string;
}

interface TracesPage {
  execution_id: string;
  traces: Trace[];
  next_after: number | null;
}

const PERSISTENT =
  'You are a careful researcher. Before searching, list the available indices first. Write down important notes after each tool call.';
/** A note with line breaks and indentation, kept as written. */
const PLAN = 'Research plan:\n\n1. Version history after v2.0\n2. For each release:\n    a. ML features\n';
const FINDING = 'Finding: 2.9 added the agent framework';

function expectError(response: HttpResult<unknown>, status: number, code: string): ErrorResponse['error'] {
  expect(response.status, JSON.stringify(response.body)).toBe(status);
  const { error } = response.body as unknown as ErrorResponse;
  expect(error.code).toBe(code);
  expect(typeof error.message).toBe('string');
  return error;
}

function expectFieldError(response: HttpResult<unknown>, field: string, mentions: string): void {
  const error = expectError(response, 400, 'validation_failed');
  expect(error.details.issues?.map((issue) => issue.field)).toContain(field);
  expect(error.message).toContain(mentions);
}

describe.each(ENGINES)('notes scratchpad on %s', (engine) => {
  let harness: Harness;
  let orgA: Tenant;
  let orgB: Tenant;

  const write = (tenant: Tenant, conversationId: string, input: unknown, executionId?: string) =>
    tenant.tool<NotesAnswer>(
      conversationId,
      input,
      'write_to_scratchpad',
      executionId ? { 'x-opspad-execution': executionId } : {},
    );
  const read = (tenant: Tenant, conversationId: string, input: unknown, executionId?: string) =>
    tenant.tool<NotesAnswer>(
      conversationId,
      input,
      'read_from_scratchpad',
      executionId ? { 'x-opspad-execution': executionId } : {},
    );

  async function startExecution(tenant: Tenant, conversationId: string): Promise<string> {
    const started = await tenant.post(`/v1/conversations/${conversationId}/executions`);
    expect(started.status, JSON.stringify(started.body)).toBe(201);
    return started.body.execution_id as string;
  }

  const endExecution = (tenant: Tenant, executionId: string) => tenant.post(`/v1/executions/${executionId}/end`);
  const traces = (tenant: Tenant, executionId: string, query = '') =>
    tenant.get<TracesPage>(`/v1/executions/${executionId}/traces${query}`);

  /** The conversation's notes and traces as stored, for "nothing changed" checks. */
  /** The conversation's rows; A's unless another organization is named. */
  async function stored(conversationId: string, organizationId = orgA.organizationId) {
    const scope = [conversationId, organizationId];
    const notes = await harness.db.query<{ execution_id: string | null; persistent: boolean; text: string }>(
      'SELECT execution_id, persistent, text FROM scratchpad_note WHERE conversation_id = $1 AND organization_id = $2 ORDER BY id',
      scope,
    );
    const traceRows = await harness.db.query<{ execution_id: string | null; kind: string; notes: string | null }>(
      'SELECT execution_id, kind, notes FROM scratchpad_trace WHERE conversation_id = $1 AND organization_id = $2 ORDER BY id',
      scope,
    );
    const executions = await harness.db.query<{ id: string; status: string }>(
      'SELECT id, status FROM assistant_execution WHERE conversation_id = $1 AND organization_id = $2 ORDER BY id',
      scope,
    );
    return { notes, traces: traceRows, executions };
  }

  beforeAll(async () => {
    harness = await startHarness(engine);
    orgA = await harness.newTenant();
    orgB = await harness.newTenant();
  });

  afterAll(async () => {
    await harness?.close();
  });

  it('walks through the reference: persistent notes, writes, history, a second execution, the end, traces', async () => {
    const conversationId = randomUUID();
    const started = await orgA.post(`/v1/conversations/${conversationId}/executions`);
    expect(started.status).toBe(201);
    expect(started.body).toMatchObject({ conversation_id: conversationId, status: 'running' });
    expect(Object.keys(started.body).sort()).toEqual(['conversation_id', 'created_at', 'execution_id', 'status']);
    expect(Number.isNaN(Date.parse(started.body.created_at as string))).toBe(false);
    const first = started.body.execution_id as string;

    // A fresh execution starts empty; an empty persistent_notes adds nothing.
    expect((await read(orgA, conversationId, {}, first)).body).toMatchObject({
      result: 'Scratchpad is empty.',
      scope: 'execution',
      execution_id: first,
    });
    expect((await read(orgA, conversationId, { persistent_notes: '' }, first)).body.result).toBe(
      'Scratchpad is empty.',
    );

    const withPersistent = await read(orgA, conversationId, { persistent_notes: PERSISTENT }, first);
    expect(withPersistent.status).toBe(200);
    expect(withPersistent.body.result).toBe(`Notes from scratchpad:\n- ${PERSISTENT}`);
    expect(withPersistent.body.persistent_note_added).toBe(true);

    const wrote = await write(orgA, conversationId, { notes: PLAN }, first);
    expect(wrote.status).toBe(200);
    expect(wrote.body.result).toBe(`Wrote to scratchpad: ${PLAN}`);

    const withHistory = await write(orgA, conversationId, { notes: FINDING, return_history: true }, first);
    expect(withHistory.body.result).toBe(`Scratchpad updated. Full content:\n- ${PERSISTENT}\n- ${PLAN}\n- ${FINDING}`);
    expect(withHistory.body.note_count).toBe(3);

    // include_history is the reference implementation's name for return_history.
    const aliased = await write(orgA, conversationId, { notes: 'step 3 done', include_history: true }, first);
    expect(aliased.body.result).toBe(
      `Scratchpad updated. Full content:\n- ${PERSISTENT}\n- ${PLAN}\n- ${FINDING}\n- step 3 done`,
    );
    const nulls = await write(orgA, conversationId, { notes: 'step 4', return_history: null }, first);
    expect(nulls.body.result).toBe('Wrote to scratchpad: step 4');

    expect((await read(orgA, conversationId, {}, first)).body.result).toBe(
      `Notes from scratchpad:\n- ${PERSISTENT}\n- ${PLAN}\n- ${FINDING}\n- step 3 done\n- step 4`,
    );

    // A second execution sees the persistent notes, not the first execution's notes.
    const second = await startExecution(orgA, conversationId);
    expect(second).not.toBe(first);
    expect((await read(orgA, conversationId, {}, second)).body.result).toBe(`Notes from scratchpad:\n- ${PERSISTENT}`);
    await write(orgA, conversationId, { notes: 'second execution note' }, second);

    // Ending clears the first execution's notes; persistent notes and the second's stay.
    const ended = await endExecution(orgA, first);
    expect(ended.status, JSON.stringify(ended.body)).toBe(200);
    expect(ended.body).toMatchObject({ execution_id: first, status: 'ended', cleared_notes: 4 });
    const after = await stored(conversationId);
    expect(after.notes.filter((note) => note.execution_id === first)).toEqual([]);
    expect(after.notes.filter((note) => note.persistent).map((note) => note.text)).toEqual([PERSISTENT]);
    expect(after.executions.find((execution) => execution.id === first)?.status).toBe('ended');

    // Ending again is harmless.
    const endedAgain = await endExecution(orgA, first);
    expect(endedAgain.status).toBe(200);
    expect(endedAgain.body).toMatchObject({ execution_id: first, status: 'ended', cleared_notes: 0 });

    // The ended execution refuses reads and writes, and records nothing.
    const late = await write(orgA, conversationId, { notes: 'too late' }, first);
    expectError(late, 409, 'execution_ended');
    expectError(await read(orgA, conversationId, {}, first), 409, 'execution_ended');
    expect((await stored(conversationId)).notes.some((note) => note.text === 'too late')).toBe(false);

    expect((await read(orgA, conversationId, {}, second)).body.result).toBe(
      `Notes from scratchpad:\n- ${PERSISTENT}\n- second execution note`,
    );

    // The trace lists every read and write of the first execution, in order.
    const listed = await traces(orgA, first);
    expect(listed.status).toBe(200);
    expect(listed.body.execution_id).toBe(first);
    expect(listed.body.next_after).toBeNull();
    expect(listed.body.traces.map(({ seq, kind, notes }) => ({ seq, kind, notes }))).toEqual([
      { seq: 1, kind: 'read', notes: undefined },
      { seq: 2, kind: 'read', notes: undefined },
      { seq: 3, kind: 'read', notes: PERSISTENT },
      { seq: 4, kind: 'write', notes: PLAN },
      { seq: 5, kind: 'write', notes: FINDING },
      { seq: 6, kind: 'write', notes: 'step 3 done' },
      { seq: 7, kind: 'write', notes: 'step 4' },
      { seq: 8, kind: 'read', notes: undefined },
    ]);
    for (const trace of listed.body.traces) {
      expect(Object.keys(trace).filter((key) => key !== 'notes')).toEqual(['seq', 'kind', 'at']);
      expect(Number.isNaN(Date.parse(trace.at))).toBe(false);
    }
    // The second execution's trace is its own, numbered from 1.
    expect((await traces(orgA, second)).body.traces.map(({ seq, kind }) => `${seq}:${kind}`)).toEqual([
      '1:read',
      '2:write',
      '3:read',
    ]);
  });

  it('pages through a trace with after and limit', async () => {
    const conversationId = randomUUID();
    const execution = await startExecution(orgA, conversationId);
    for (const note of ['a', 'b', 'c', 'd', 'e']) {
      await write(orgA, conversationId, { notes: note }, execution);
    }
    const firstPage = await traces(orgA, execution, '?limit=2');
    expect(firstPage.body.traces.map((trace) => trace.notes)).toEqual(['a', 'b']);
    expect(firstPage.body.next_after).toBe(2);
    const secondPage = await traces(orgA, execution, '?after=2&limit=2');
    expect(secondPage.body.traces.map((trace) => [trace.seq, trace.notes])).toEqual([
      [3, 'c'],
      [4, 'd'],
    ]);
    const lastPage = await traces(orgA, execution, '?after=4&limit=2');
    expect(lastPage.body.traces.map((trace) => [trace.seq, trace.notes])).toEqual([[5, 'e']]);
    expect(lastPage.body.next_after).toBeNull();
    expectFieldError(await traces(orgA, execution, '?limit=0'), 'limit', 'limit');
    expectFieldError(await traces(orgA, execution, '?after=x'), 'after', 'after');
  });

  it('keeps the conversation scope apart from executions, and persistent notes shared by both', async () => {
    const conversationId = randomUUID();
    // No header: the conversation's own notes (the conversation is created on first use).
    expect((await read(orgA, conversationId, {})).body).toMatchObject({
      result: 'Scratchpad is empty.',
      scope: 'conversation',
      execution_id: null,
    });
    await write(orgA, conversationId, { notes: 'conversation note' });
    const execution = await startExecution(orgA, conversationId);
    await write(orgA, conversationId, { notes: 'execution note' }, execution);
    await read(orgA, conversationId, { persistent_notes: 'always cite sources' }, execution);

    expect((await read(orgA, conversationId, {})).body.result).toBe(
      'Notes from scratchpad:\n- always cite sources\n- conversation note',
    );
    expect((await read(orgA, conversationId, {}, execution)).body.result).toBe(
      'Notes from scratchpad:\n- always cite sources\n- execution note',
    );

    // Ending the execution leaves the conversation's notes alone.
    expect((await endExecution(orgA, execution)).body).toMatchObject({ cleared_notes: 1 });
    expect((await read(orgA, conversationId, {})).body.result).toBe(
      'Notes from scratchpad:\n- always cite sources\n- conversation note',
    );
    const rows = await stored(conversationId);
    expect(rows.notes).toEqual([
      { execution_id: null, persistent: false, text: 'conversation note' },
      { execution_id: null, persistent: true, text: 'always cite sources' },
    ]);
    // Conversation-scope calls are traced too, without an execution.
    expect(rows.traces.filter((trace) => trace.execution_id === null).map((trace) => trace.kind)).toEqual([
      'read',
      'write',
      'read',
      'read',
    ]);
  });

  it('stores the same persistent note once, however often and however concurrently it is given', async () => {
    const conversationId = randomUUID();
    const execution = await startExecution(orgA, conversationId);
    const firstRead = await read(orgA, conversationId, { persistent_notes: PERSISTENT });
    expect(firstRead.body.persistent_note_added).toBe(true);
    const again = await read(orgA, conversationId, { persistent_notes: PERSISTENT }, execution);
    expect(again.body.persistent_note_added).toBe(false);
    expect(again.body.result).toBe(`Notes from scratchpad:\n- ${PERSISTENT}`);

    // Identical notes at once, in both scopes, mixed with writes into the execution.
    const concurrent = await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        read(orgA, conversationId, { persistent_notes: 'same note, at once' }, i % 2 === 0 ? execution : undefined),
      ),
    );
    const writes = await Promise.all([
      write(orgA, conversationId, { notes: 'w1' }, execution),
      read(orgA, conversationId, { persistent_notes: 'same note, at once' }, execution),
      write(orgA, conversationId, { notes: 'w2' }, execution),
    ]);
    expect([...concurrent, ...writes].map((response) => response.status)).toEqual(Array(9).fill(200));
    expect(concurrent.filter((response) => response.body.persistent_note_added)).toHaveLength(1);
    expect(writes[1]?.body.persistent_note_added).toBe(false);

    // Exact match only: a note differing in case is another note.
    await read(orgA, conversationId, { persistent_notes: PERSISTENT.toUpperCase() });
    const persistent = (await stored(conversationId)).notes.filter((note) => note.persistent).map((note) => note.text);
    expect(persistent).toEqual([PERSISTENT, 'same note, at once', PERSISTENT.toUpperCase()]);
    expect((await read(orgA, conversationId, {}, execution)).body.result).toMatch(
      `Notes from scratchpad:\n- ${PERSISTENT}\n- same note, at once\n- ${PERSISTENT.toUpperCase()}\n- w`,
    );
  });

  it('never keeps a note written into an execution that ends at the same time', async () => {
    const conversationId = randomUUID();
    const execution = await startExecution(orgA, conversationId);
    const calls = await Promise.all([
      ...Array.from({ length: 5 }, (_, i) => write(orgA, conversationId, { notes: `racing ${i}` }, execution)),
      endExecution(orgA, execution),
      ...Array.from({ length: 5 }, (_, i) => write(orgA, conversationId, { notes: `racing ${i + 5}` }, execution)),
    ]);
    const ended = calls[5] as HttpResult;
    expect(ended.status).toBe(200);
    const writes = [...calls.slice(0, 5), ...calls.slice(6)];
    for (const response of writes) {
      expect([200, 409]).toContain(response.status);
    }
    const accepted = writes.filter((response) => response.status === 200).length;
    // Every accepted write happened before the end and was cleared by it; none survives.
    expect(ended.body.cleared_notes).toBe(accepted);
    const rows = await stored(conversationId);
    expect(rows.notes.filter((note) => note.execution_id === execution)).toEqual([]);
    expect(rows.traces.filter((trace) => trace.kind === 'write')).toHaveLength(accepted);
  });

  it('answers 404 for an unknown execution, and for one of another conversation, writing nothing', async () => {
    const conversationId = randomUUID();
    const otherConversation = randomUUID();
    const execution = await startExecution(orgA, conversationId);
    const unknown = randomUUID();

    for (const response of [
      await write(orgA, conversationId, { notes: 'x' }, unknown),
      await read(orgA, conversationId, { persistent_notes: 'p' }, unknown),
      await endExecution(orgA, unknown),
      await traces(orgA, unknown),
      // The execution belongs to conversationId, not otherConversation.
      await write(orgA, otherConversation, { notes: 'x' }, execution),
    ]) {
      const error = expectError(response, 404, 'not_found');
      expect(error.message).toMatch(/Execution [0-9a-f-]{36} was not found/);
    }
    const rows = await stored(conversationId);
    expect(rows.notes).toEqual([]);
    expect(rows.traces).toEqual([]);
    expect(await stored(otherConversation)).toEqual({ notes: [], traces: [], executions: [] });
    // A failed call does not create the conversation either.
    expect(await harness.db.query('SELECT 1 FROM assistant_conversation WHERE id = $1', [otherConversation])).toEqual(
      [],
    );
  });

  it("walls tenants off: another organization's key cannot end, trace or use A's execution, nor see A's notes", async () => {
    const conversationId = randomUUID();
    const execution = await startExecution(orgA, conversationId);
    await read(orgA, conversationId, { persistent_notes: 'A only' }, execution);
    await write(orgA, conversationId, { notes: 'A secret' }, execution);
    const before = await stored(conversationId);
    const bConversation = randomUUID();

    for (const [label, response] of [
      ['end', await endExecution(orgB, execution)],
      ['traces', await traces(orgB, execution)],
      ['write in own conversation', await write(orgB, bConversation, { notes: 'x' }, execution)],
      ['read in own conversation', await read(orgB, bConversation, {}, execution)],
      ['write under A conversation id', await write(orgB, conversationId, { notes: 'x' }, execution)],
    ] as const) {
      expect(response.status, `${label}: ${JSON.stringify(response.body)}`).toBe(404);
      expect((response.body as unknown as ErrorResponse).error.code, label).toBe('not_found');
      expect(JSON.stringify(response.body), label).not.toContain('A secret');
    }
    // Under A's conversation id B has a conversation of its own: its notes, not A's.
    const readByB = await read(orgB, conversationId, {});
    expect(readByB.body.result).toBe('Scratchpad is empty.');
    expect(JSON.stringify(readByB.body)).not.toMatch(/A only|A secret/);
    expect((await orgB.post(`/v1/conversations/${conversationId}/executions`)).status).toBe(201);
    expect((await stored(conversationId, orgB.organizationId)).executions).toHaveLength(1);
    expect(await stored(conversationId)).toEqual(before);
    expect(before.executions).toEqual([{ id: execution, status: 'running' }]);
    expect(await stored(bConversation)).toEqual({ notes: [], traces: [], executions: [] });
    // A's execution still works for A.
    expect((await read(orgA, conversationId, {}, execution)).body.result).toBe(
      'Notes from scratchpad:\n- A only\n- A secret',
    );
  });

  it('refuses bad input with 400 naming the field, and writes nothing', async () => {
    const conversationId = randomUUID();
    const execution = await startExecution(orgA, conversationId);
    const before = await stored(conversationId);

    expectFieldError(await write(orgA, conversationId, {}, execution), 'notes', 'notes');
    expectFieldError(await write(orgA, conversationId, { notes: '' }, execution), 'notes', 'must not be empty');
    expectFieldError(await write(orgA, conversationId, { notes: 42 }, execution), 'notes', 'must be a string');
    expectFieldError(await write(orgA, conversationId, { notes: null }, execution), 'notes', 'notes');
    expectFieldError(
      await write(orgA, conversationId, { notes: 'x'.repeat(20_001) }, execution),
      'notes',
      'at most 20000',
    );
    expectFieldError(
      await write(orgA, conversationId, { notes: 'x', priority: 'high' }, execution),
      '(body)',
      'unknown field "priority"',
    );
    expectFieldError(
      await write(orgA, conversationId, { notes: 'x', return_history: 'yes' }, execution),
      'return_history',
      'return_history',
    );
    expectFieldError(
      await write(orgA, conversationId, { notes: 'x', return_history: true, include_history: false }, execution),
      'include_history',
      'include_history',
    );
    expectFieldError(
      await read(orgA, conversationId, { persistent_notes: 7 }, execution),
      'persistent_notes',
      'persistent_notes',
    );
    expectFieldError(await read(orgA, conversationId, { notes: 'x' }, execution), '(body)', 'unknown field "notes"');
    expectFieldError(
      await write(orgA, conversationId, { notes: 'x' }, 'not-a-uuid'),
      'X-Opspad-Execution',
      'X-Opspad-Execution',
    );
    expectFieldError(
      await orgA.post(`/v1/conversations/${conversationId}/executions`, { name: 'x' }),
      '(body)',
      'unknown field "name"',
    );
    expectFieldError(await endExecution(orgA, 'nope'), 'executionId', 'executionId');

    expect(await stored(conversationId)).toEqual(before);
    expect(before.notes).toEqual([]);
    expect(before.traces).toEqual([]);
    expect(before.executions).toHaveLength(1);
  });

  it('offers both tools in GET /v1/tools', async () => {
    const listed = await orgA.get<{ tools: { name: string }[] }>('/v1/tools');
    expect(listed.body.tools.map((tool) => tool.name)).toEqual(
      expect.arrayContaining(['write_to_scratchpad', 'read_from_scratchpad']),
    );
  });
});
