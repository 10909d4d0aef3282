/**
 * The structured scratchpad: versions with optimistic concurrency, citations, recitation in the
 * context fragment under its budget, and reorganization by a model (faked by a real local HTTP
 * server in the OpenAI and Anthropic wire formats) or the built-in reorganizer, on a cadence and
 * from the scheduled sweep — never overwriting a write that landed while it ran.
 */
import { createHash, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sweepPads } from '../../src/queue/reorganize-queue.ts';
import { type FakeLlm, startFakeLlm } from '../helpers/fake-llm.ts';
import { ENGINES, type Harness, ids, startHarness, type Tenant } from '../helpers/harness.ts';
import { eventually } from '../helpers/wait.ts';

interface PadBody {
  scratchpad: {
    version: number;
    goals: { text: string; source_ref?: string }[];
    open_items: { text: string; source_ref?: string }[];
    facts: { text: string; source_ref: string }[];
    refs: { id: string; kind: string }[];
  };
}

function client(harness: Harness, tenant: Tenant) {
  const headers = { authorization: `Bearer ${tenant.apiKey}`, 'content-type': 'application/json' };
  return {
    get: <T = PadBody>(conversation: string, path = '') =>
      harness.request<T>(`/v1/conversations/${conversation}/scratchpad${path}`, { headers }),
    put: <T = PadBody>(conversation: string, body: unknown, path = '') =>
      harness.request<T>(`/v1/conversations/${conversation}/scratchpad${path}`, {
        method: 'PUT',
        headers,
        body: JSON.stringify(body),
      }),
    reorganize: <T = Record<string, unknown>>(conversation: string, body: unknown = {}) =>
      harness.request<T>(`/v1/conversations/${conversation}/scratchpad/reorganize`, {
        method: 'POST',
        headers,
        body: JSON.stringify(body),
      }),
    update: (conversation: string, input: unknown) => tenant.tool(conversation, input, 'update_scratchpad'),
  };
}

describe.each(ENGINES)('the structured scratchpad on %s', (engine) => {
  let harness: Harness;
  let tenant: Tenant;
  let pad: ReturnType<typeof client>;

  beforeAll(async () => {
    harness = await startHarness(engine);
    tenant = await harness.newTenant();
    pad = client(harness, tenant);
  });
  afterAll(async () => {
    await harness.close();
  });

  it('starts from the task, versions every write, and refuses a stale expected_version with the current one', async () => {
    const conversation = randomUUID();
    expect((await pad.get(conversation)).body.scratchpad).toMatchObject({ version: 0, goals: [], facts: [] });

    const first = await pad.update(conversation, { task: 'Follow up with every Lead by SMS', expected_version: 0 });
    expect(first.status, JSON.stringify(first.body)).toBe(200);
    expect(first.body).toMatchObject({ version: 1, counts: { goals: 1, refs: 1 } });
    const stored = await pad.get(conversation);
    expect(stored.body.scratchpad.goals).toEqual([
      { text: 'Follow up with every Lead by SMS', source_ref: 'user:initial' },
    ]);
    expect(stored.body.scratchpad.refs[0]).toMatchObject({ id: 'user:initial', kind: 'user_input' });

    const second = await pad.update(conversation, {
      expected_version: 1,
      add: {
        refs: [{ id: 'crm:search-1', kind: 'tool_call', label: 'contacts tagged Lead' }],
        facts: [{ text: '30 Leads', source_ref: 'crm:search-1' }],
      },
      reason: 'searched the CRM',
    });
    expect(second.body).toMatchObject({ version: 2, counts: { facts: 1, refs: 2 } });

    const stale = await pad.put(conversation, { expected_version: 1, scratchpad: { goals: [{ text: 'other' }] } });
    expect(stale.status).toBe(409);
    expect(stale.body).toMatchObject({ error: { code: 'version_conflict', details: { current_version: 2 } } });

    const versions = await pad.get<{ versions: { version: number; source: string; reason: string }[] }>(
      conversation,
      '/versions',
    );
    expect(versions.body.versions.map((v) => [v.version, v.source, v.reason])).toEqual([
      [2, 'tool', 'searched the CRM'],
      [1, 'tool', 'update_scratchpad'],
    ]);
  });

  it('refuses a fact citing a ref that is not in refs, naming it, and writes nothing', async () => {
    const conversation = randomUUID();
    await pad.update(conversation, { task: 'Clean the CRM' });
    const refused = await pad.put(conversation, {
      expected_version: 1,
      scratchpad: { goals: [{ text: 'Clean the CRM' }], facts: [{ text: 'a fact', source_ref: 'nowhere' }] },
    });
    expect(refused.status).toBe(400);
    expect(refused.body).toMatchObject({ error: { code: 'validation_failed' } });
    expect((refused.body as unknown as { error: { message: string } }).error.message).toContain('facts[0].source_ref');
    expect((await pad.get(conversation)).body.scratchpad.version).toBe(1);

    const unknownOperation = await pad.update(conversation, {
      add: { refs: [{ id: `operation:${randomUUID()}`, kind: 'operation' }] },
    });
    expect(unknownOperation.status).toBe(400);
    expect((unknownOperation.body as { error: { message: string } }).error.message).toMatch(
      /no operation .* in this conversation/,
    );
  });

  it('lets facts cite the operation and the item they came from', async () => {
    const conversation = randomUUID();
    const created = await tenant.op(conversation, {
      action: 'create',
      operation_type: 'send_sms',
      total_items: 3,
      item_ids: ids(3),
    });
    const operationId = created.body.operation_id as string;
    const written = await pad.update(conversation, {
      add: {
        refs: [
          { id: `operation:${operationId}`, kind: 'operation' },
          { id: `item:${operationId}:contact-2`, kind: 'item' },
        ],
        facts: [{ text: 'contact-2 has no phone number', source_ref: `item:${operationId}:contact-2` }],
      },
    });
    expect(written.status, JSON.stringify(written.body)).toBe(200);
  });

  it('lets exactly one of two writers based on the same version win', async () => {
    const conversation = randomUUID();
    await pad.update(conversation, { task: 'Race' });
    const results = await Promise.all(
      ['alpha', 'beta'].map((name) =>
        pad.put(conversation, { expected_version: 1, scratchpad: { goals: [{ text: `goal from ${name}` }] } }),
      ),
    );
    expect(results.map((r) => r.status).sort()).toEqual([200, 409]);
    const winner = results.find((r) => r.status === 200) as { body: PadBody };
    const now = await pad.get(conversation);
    expect(now.body.scratchpad.version).toBe(2);
    expect(now.body.scratchpad.goals).toEqual(winner.body.scratchpad.goals);
  });

  it('recites the pad at the end of the context fragment, within budget with 4,000 facts, and records each render', async () => {
    const conversation = randomUUID();
    await tenant.op(conversation, { action: 'create', operation_type: 'send_sms', total_items: 2, item_ids: ids(2) });
    // 4,000 facts: about 200 KB, within OPSPAD_MAX_SCRATCHPAD_BYTES (256 KiB), fifty times the budget.
    const facts = Array.from({ length: 4000 }, (_, i) => ({ text: `fact number ${i}`, source_ref: 'user:initial' }));
    const written = await pad.put(conversation, {
      expected_version: 0,
      task: 'Remember a lot',
      scratchpad: { facts, open_items: [{ text: 'check the opt-outs' }] },
    });
    expect(written.status, JSON.stringify(written.body).slice(0, 300)).toBe(200);

    const context = await tenant.context(conversation);
    const text = context.body.text;
    const recitation = text.slice(text.indexOf('Scratchpad v1'));
    expect(text.startsWith('Operations (manage_assistant_operation')).toBe(true);
    expect(recitation.length).toBeLessThanOrEqual(4000);
    expect((context.body as { tokens?: number }).tokens).toBeLessThanOrEqual(1500); // OPSPAD_CONTEXT_MAX_TOKENS
    expect(recitation).toMatch(/^Scratchpad v1:\nGoals:\n- Remember a lot \[user:initial\]/);
    expect(recitation).toContain('Facts from user:initial (user_input: Initial task):');
    expect(recitation).toContain('- fact number 3999');
    expect(recitation).toMatch(/Facts:\n- …\d+ older facts not shown/);
    expect(recitation).toContain('- check the opt-outs');
    expect(recitation).not.toContain('fact number 0 ');
    // Stable between turns: nothing in it changes unless the pad does.
    expect((await tenant.context(conversation)).body.text).toBe(text);

    const renders = await harness.request<{ renders: { pad_version: number; chars: number; sha256: string }[] }>(
      `/v1/conversations/${conversation}/context-renders`,
      { headers: { authorization: `Bearer ${tenant.apiKey}` } },
    );
    expect(renders.body.renders).toHaveLength(2);
    expect(renders.body.renders[0]).toMatchObject({
      pad_version: 1,
      chars: text.length,
      sha256: createHash('sha256').update(text).digest('hex'),
    });
  });

  it('validates settings like the reference: wrong types and negatives get clear errors', async () => {
    const conversation = randomUUID();
    const negative = await pad.put(conversation, { reorganize_every: -1 }, '/settings');
    expect(negative.status).toBe(400);
    expect((negative.body as unknown as { error: { message: string } }).error.message).toContain(
      'reorganize_every: must be >= 0',
    );
    const wrongType = await pad.put(conversation, { schema_retries: '1' }, '/settings');
    expect(wrongType.status).toBe(400);
    expect((wrongType.body as unknown as { error: { message: string } }).error.message).toContain('schema_retries');
    const ok = await pad.put<{ settings: Record<string, number> }>(conversation, { reorganize_every: 0 }, '/settings');
    expect(ok.body.settings).toEqual({ reorganize_every: 0, schema_retries: 1, max_recent_messages: 8 });
  });

  it('keeps another organization out of the pad: under the same id it has a pad of its own', async () => {
    const conversation = randomUUID();
    await pad.update(conversation, { task: 'Private' });
    const other = client(harness, await harness.newTenant());
    const empty = await other.get(conversation);
    expect(empty.status).toBe(200);
    expect(empty.body.scratchpad).toMatchObject({ version: 0, goals: [] });
    expect((await other.get<{ versions: unknown[] }>(conversation, '/versions')).body.versions).toEqual([]);
    expect((await other.get<{ events: unknown[] }>(conversation, '/events')).body.events).toEqual([]);
    // expected_version 1 is A's version, not B's: B's pad is at 0.
    expect((await other.put(conversation, { expected_version: 1, scratchpad: {} })).status).toBe(409);
    expect((await other.update(conversation, { add: { goals: [{ text: 'intrude' }] } })).status).toBe(200);
    expect((await other.get(conversation)).body.scratchpad).toMatchObject({ version: 1, goals: [{ text: 'intrude' }] });
    expect((await pad.get(conversation)).body.scratchpad).toMatchObject({ version: 1, goals: [{ text: 'Private' }] });
    expect((await pad.get(conversation, '/versions')).body).toMatchObject({ versions: [{ version: 1 }] });
  });
});

describe.each(['openai', 'anthropic'] as const)('reorganization by a model (%s wire format, postgres)', (provider) => {
  let llm: FakeLlm;
  let harness: Harness;
  let tenant: Tenant;
  let pad: ReturnType<typeof client>;

  beforeAll(async () => {
    llm = await startFakeLlm();
    harness = await startHarness('postgres', {
      env: {
        OPSPAD_LLM_PROVIDER: provider,
        OPSPAD_LLM_BASE_URL: provider === 'openai' ? `${llm.url}/v1` : llm.url,
        OPSPAD_LLM_API_KEY: 'test-key',
        OPSPAD_LLM_MODEL: 'test-model',
      },
    });
    tenant = await harness.newTenant();
    pad = client(harness, tenant);
  });
  afterAll(async () => {
    await harness.close();
    await llm.close();
  });

  async function seeded() {
    const conversation = randomUUID();
    await pad.update(conversation, {
      task: 'Follow up with Leads',
      add: {
        facts: [
          { text: '30 Leads found', source_ref: 'user:initial' },
          { text: '30 Leads found', source_ref: 'user:initial' },
        ],
      },
    });
    return conversation;
  }

  async function events(conversation: string) {
    return (await pad.get<{ events: { status: string; data: Record<string, unknown> }[] }>(conversation, '/events'))
      .body.events;
  }

  it('saves a valid reorganization as a new version from the reorganizer', async () => {
    const conversation = await seeded();
    llm.script = [{ kind: 'echo', change: (p) => ({ ...p, facts: p.facts.slice(0, 1) }) }];
    const outcome = await pad.reorganize(conversation, { recent_messages: [{ role: 'user', content: 'go on' }] });
    expect(outcome.body).toMatchObject({
      status: 'reorganized',
      version: 2,
      before_counts: { facts: 2 },
      after_counts: { facts: 1 },
    });
    const versions = await pad.get<{ versions: { version: number; source: string }[] }>(conversation, '/versions');
    expect(versions.body.versions[0]).toMatchObject({ version: 2, source: 'reorganizer' });
    const request = llm.requests.at(-1);
    expect(request?.path).toBe(provider === 'openai' ? '/v1/chat/completions' : '/v1/messages');
    expect(JSON.stringify(request?.body)).toContain('turn:1');
  });

  it('rejects an output citing an unknown ref: the pad is unchanged and invalid_sources is recorded', async () => {
    const conversation = await seeded();
    llm.script = [{ kind: 'unknown_ref' }, { kind: 'unknown_ref' }];
    const outcome = await pad.reorganize(conversation);
    expect(outcome.body).toMatchObject({ status: 'invalid_sources' });
    expect(JSON.stringify(outcome.body)).toContain('unknown source ref \\"web:made-up\\"');
    expect((await pad.get(conversation)).body.scratchpad.version).toBe(1);
    expect((await events(conversation)).map((e) => e.status)).toEqual(['invalid_sources']);
  });

  it("tells the model of the conversation's operations and their progress, and keeps a fact citing one", async () => {
    const conversation = await seeded();
    const created = await tenant.op(conversation, {
      action: 'create',
      operation_type: 'send_sms',
      total_items: 3,
      item_ids: ids(3),
    });
    const ref = `operation:${created.body.operation_id as string}`;
    llm.script = [
      {
        kind: 'echo',
        change: (p) => ({
          ...p,
          refs: [...p.refs, { id: ref, kind: 'operation' }],
          facts: [...p.facts.slice(0, 1), { text: 'three texts to send', source_ref: ref }],
        }),
      },
    ];
    const outcome = await pad.reorganize(conversation);
    expect(outcome.body).toMatchObject({ status: 'reorganized', version: 2 });
    expect(JSON.stringify(llm.requests.at(-1)?.body)).toContain('send_sms, active, 0/3 recorded');
    const facts = (await pad.get(conversation)).body.scratchpad.facts as { source_ref: string }[];
    expect(facts.map((f) => f.source_ref)).toContain(ref);
  });

  it('records llm_error when the model API fails, after retrying once', async () => {
    const conversation = await seeded();
    const before = llm.requests.length;
    llm.script = [
      { kind: 'status', status: 500 },
      { kind: 'status', status: 500 },
    ];
    const outcome = await pad.reorganize(conversation);
    expect(outcome.body).toMatchObject({ status: 'llm_error' });
    expect(String(outcome.body.error)).toContain('HTTP 500');
    expect(llm.requests.length - before).toBe(2);
    expect((await pad.get(conversation)).body.scratchpad.version).toBe(1);
  });

  it('never overwrites a note written while a slow model was reorganizing', async () => {
    const conversation = await seeded();
    let release = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    llm.script = [{ kind: 'hold', release: gate }, { kind: 'echo' }];
    const arrived = llm.nextRequest();
    const reorganizing = pad.reorganize(conversation);
    await arrived;
    const note = await pad.update(conversation, {
      add: { facts: [{ text: 'written during the slow call', source_ref: 'user:initial' }] },
    });
    expect(note.body).toMatchObject({ version: 2 });
    release();
    const outcome = await reorganizing;
    expect(outcome.body).toMatchObject({ status: 'reorganized', version: 3 });
    const facts = (await pad.get(conversation)).body.scratchpad.facts.map((f) => f.text);
    expect(facts).toContain('written during the slow call');
  });
});

describe('reorganization on a cadence and from the sweep (postgres, built-in reorganizer, workers)', () => {
  let harness: Harness;
  let tenant: Tenant;
  let pad: ReturnType<typeof client>;

  beforeAll(async () => {
    harness = await startHarness('postgres', { workers: true });
    tenant = await harness.newTenant();
    pad = client(harness, tenant);
  });
  afterAll(async () => {
    await harness.close();
  });

  it('queues a reorganization on the third write, not the second, and the worker runs it', async () => {
    const conversation = randomUUID();
    const fact = { text: 'the same fact', source_ref: 'user:initial' };
    const first = await pad.update(conversation, { task: 'Cadence', add: { facts: [fact] } });
    const second = await pad.update(conversation, { add: { facts: [fact] } });
    expect(first.body.reorganization_queued).toBe(false);
    expect(second.body.reorganization_queued).toBe(false);
    const queue = harness.service.reorganizeQueue.queue;
    expect(await queue.getJob(`pad.${tenant.organizationId}.${conversation}.2`)).toBeUndefined();

    const third = await pad.update(conversation, { add: { facts: [fact] } });
    expect(third.body).toMatchObject({ version: 3, reorganization_queued: true });
    const reorganized = await eventually(
      async () => {
        const got = await pad.get<{ events: { status: string; data: { version?: number } }[] }>(
          conversation,
          '/events',
        );
        return got.body.events.find((e) => e.status === 'reorganized');
      },
      { what: 'the cadence reorganization' },
    );
    expect(reorganized.data.version).toBe(4);
    const after = await pad.get(conversation);
    expect(after.body.scratchpad.facts).toEqual([fact]); // three copies merged into one
  });

  it('sweeps only the pads changed since their last reorganization', async () => {
    const changed = randomUUID();
    const settled = randomUUID();
    await pad.put(changed, { reorganize_every: 0 }, '/settings');
    await pad.update(changed, { task: 'Changed since' });
    await pad.update(settled, { task: 'Settled' });
    const settledOutcome = await pad.reorganize(settled);
    expect(settledOutcome.body.status).toBe('reorganized');

    const queue = harness.service.reorganizeQueue;
    await sweepPads(harness.service.reorganizeDeps, queue, 10_000);
    expect(await queue.queue.getJob(`pad.${tenant.organizationId}.${changed}.1`)).toBeDefined();
    const settledVersion = (await pad.get(settled)).body.scratchpad.version;
    expect(await queue.queue.getJob(`pad.${tenant.organizationId}.${settled}.${settledVersion}`)).toBeUndefined();
  });

  it('runs the sweep from a BullMQ job scheduler', async () => {
    const schedulers = await harness.service.reorganizeQueue.queue.getJobSchedulers();
    expect(schedulers.map((s) => s.key)).toContain('reorganize-sweep');
  });
});
