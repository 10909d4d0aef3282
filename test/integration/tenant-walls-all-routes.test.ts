/**
 * Tenant walls on every route, table-driven, on real Postgres and on PGlite. The table is checked
 * against the routes createApp registers (walking its express router), the tools the registry
 * has and the operation tool's actions: a route, tool or action the table does not cover fails
 * the test.
 *
 * For each entry, organization B's key aims at organization A's conversation, operation and
 * execution ids (as A spells them, and upper-cased). A conversation is (organization, id), so under
 * A's conversation id B works in a conversation of its own: every answer is exactly (up to ids,
 * times and hashes) the answer B gets when it sends the same requests to an id nobody else uses.
 * For A's operation and execution ids the answer is 404 not_found — never 403, never A's data —
 * exactly the answer an id that does not exist gets. A's rows are unchanged afterwards (digests),
 * and B's too but for what B did in its own conversations. Then A's own key gets past every one of
 * those requests, so the 404s come from the wall and not from a malformed request.
 *
 * Also: API keys are stored as their SHA-256 only (no table holds the key), a revoked key is
 * refused, and the operator pages (Bull Board, /metrics, the operations view) need the operator
 * credentials: 401 without, and 401 with an API key as Bearer.
 */
import { createHash, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OPERATION_ACTIONS } from '../../src/domain/operation-input.ts';
import { EMPTY_PRUNED_FAILURES } from '../../src/domain/retention.ts';
import type { Database } from '../../src/store/db/db.ts';
import {
  createBulkAction,
  exchangeOAuthCode,
  grantOAuthClient,
  noteThrottled,
  openMcpSession,
  registerOAuthClient,
  revokeApiKey,
  setKeyLimit,
} from '../../src/store/index.ts';
import { deleteItemRange, saveOperationProgress } from '../../src/store/retention/retention-sql.ts';
import { createToolRegistry } from '../../src/tools/registry.ts';
import { registeredRoutes } from '../helpers/app-routes.ts';
import { organizationDigest, rowsPerTable } from '../helpers/digest.ts';
import { ENGINES, type Engine, type Harness, ids, startHarness, type Tenant } from '../helpers/harness.ts';
import { type RawClient, type RawRequest, type RawResponse, rawClient } from '../helpers/raw-http.ts';

// ─── What the app registers ──────────────────────────────────────────────────────────────────

const TOOL_NAMES = createToolRegistry({
  db: {} as never,
  maxItems: 10,
  hasHandler: () => false,
  reciteBudget: 4000,
}).names;

// ─── The table ───────────────────────────────────────────────────────────────────────────────

/** A's ids and B's, as the attacks need them. */
interface World {
  a: { conversation: string; paused: string; active: string; execution: string };
  /** `twin`: a conversation id only B uses, which gets every request B sends to A's conversation id. */
  b: { conversation: string; twin: string };
}

interface Attack {
  label: string;
  method: string;
  path: string;
  body?: unknown;
  headers?: Record<string, string>;
  /**
   * A's operation or execution ids in the request: replaced by ids that exist nowhere, the
   * request must get the very same answer (status, code, message, details).
   */
  foreignIds?: string[];
  /** A's own key sends the same request and is not told not_found (it finds A's data). */
  ownerGetsPast?: boolean;
  /**
   * B's answer when not 404: a citation of A's record in B's own pad is refused as a citation of
   * a record that does not exist (400), like any unknown record.
   */
  refusedWith?: { status: number; code: string };
}

const tool = (conversation: string, name: string) => `/v1/conversations/${conversation}/tools/${name}`;

/** Every operation-tool action, aimed at `operationId` where the action takes one. */
function operationActions(operationId: string): Record<(typeof OPERATION_ACTIONS)[number], unknown[]> {
  return {
    create: [{ action: 'create', operation_type: 'steal', total_items: 2, item_ids: ['x', 'y'] }],
    progress: [{ action: 'progress' }, { action: 'progress', operation_id: operationId, lease_owner: 'intruder' }],
    update: [
      { action: 'update', operation_id: operationId, completed_ids: ['victim-lead-4'] },
      { action: 'update', operation_id: operationId, failed: [{ id: 'victim-item-3', reason: 'x' }] },
    ],
    complete: [{ action: 'complete', operation_id: operationId, force: true }],
    resume: [{ action: 'resume', operation_id: operationId }],
    pause: [{ action: 'pause' }, { action: 'pause', operation_id: operationId }],
    cancel: [{ action: 'cancel', operation_id: operationId }],
    get: [{ action: 'get' }, { action: 'get', operation_id: operationId, failures_limit: 500 }],
    retry_failed: [{ action: 'retry_failed', operation_id: operationId }],
  };
}

/** Attacks per tool. */
const TOOL_ATTACKS: Record<string, (w: World) => Attack[]> = {
  manage_assistant_operation: (w) =>
    [w.a.paused, w.a.active].flatMap((operationId) =>
      Object.entries(operationActions(operationId)).flatMap(([action, inputs]) =>
        inputs.flatMap((input): Attack[] => {
          const takesId = typeof input === 'object' && input !== null && 'operation_id' in input;
          return [
            // Under A's conversation id: B's own conversation.
            {
              label: `${action} in A's conversation`,
              method: 'POST',
              path: tool(w.a.conversation, 'manage_assistant_operation'),
              body: input,
              ownerGetsPast: true,
            },
            // In B's own conversation, naming A's operation: the operation is not found.
            ...(takesId
              ? [
                  {
                    label: `${action} of A's operation in B's conversation`,
                    method: 'POST',
                    path: tool(w.b.conversation, 'manage_assistant_operation'),
                    body: input,
                    foreignIds: [operationId],
                  },
                ]
              : []),
          ];
        }),
      ),
    ),
  write_to_scratchpad: (w) => notesAttacks(w, 'write_to_scratchpad', { notes: 'intruder note' }),
  read_from_scratchpad: (w) => notesAttacks(w, 'read_from_scratchpad', { persistent_notes: 'intruder standing note' }),
  update_scratchpad: (w) => [
    {
      label: "update_scratchpad in A's conversation",
      method: 'POST',
      path: tool(w.a.conversation, 'update_scratchpad'),
      body: { add: { open_items: [{ text: 'intruder item' }] } },
      ownerGetsPast: true,
    },
    {
      label: "update_scratchpad in B's conversation citing A's operation and item",
      method: 'POST',
      path: tool(w.b.conversation, 'update_scratchpad'),
      body: {
        add: {
          facts: [{ text: 'stolen', source_ref: `operation:${w.a.paused}` }],
          refs: [
            { id: `operation:${w.a.paused}`, kind: 'operation' },
            { id: `item:${w.a.paused}:victim-item-2`, kind: 'item' },
          ],
        },
      },
      foreignIds: [w.a.paused],
      refusedWith: { status: 400, code: 'validation_failed' },
    },
  ],
};

function notesAttacks(w: World, name: string, input: unknown): Attack[] {
  return [
    {
      label: `${name} in A's conversation`,
      method: 'POST',
      path: tool(w.a.conversation, name),
      body: input,
      ownerGetsPast: true,
    },
    {
      label: `${name} in A's conversation and execution`,
      method: 'POST',
      path: tool(w.a.conversation, name),
      body: input,
      headers: { 'x-opspad-execution': w.a.execution },
      ownerGetsPast: true,
    },
    {
      label: `${name} in B's conversation with A's execution`,
      method: 'POST',
      path: tool(w.b.conversation, name),
      body: input,
      headers: { 'x-opspad-execution': w.a.execution },
      foreignIds: [w.a.execution],
    },
  ];
}

/** Attacks per route; the keys must be exactly the /v1 routes createApp registers. */
const ROUTE_ATTACKS: Record<string, (w: World) => Attack[]> = {
  'GET /v1/tools': () => [], // holds no tenant data: checked below to carry none of A's
  'POST /v1/conversations/:conversationId/tools/:toolName': (w) =>
    TOOL_NAMES.flatMap((name) => (TOOL_ATTACKS[name] ?? (() => []))(w)),
  'GET /v1/conversations/:conversationId/context': (w) => [conversationAttack('GET', w, '/context')],
  'GET /v1/conversations/:conversationId/context-renders': (w) => [conversationAttack('GET', w, '/context-renders')],
  'GET /v1/conversations/:conversationId/operations': (w) => [conversationAttack('GET', w, '/operations')],
  'GET /v1/conversations/:conversationId/scratchpad': (w) => [conversationAttack('GET', w, '/scratchpad')],
  'PUT /v1/conversations/:conversationId/scratchpad': (w) => [
    conversationAttack('PUT', w, '/scratchpad', { expected_version: 1, scratchpad: { goals: [{ text: 'mine now' }] } }),
    {
      label: "PUT B's scratchpad citing A's operation",
      method: 'PUT',
      path: `/v1/conversations/${w.b.conversation}/scratchpad`,
      body: {
        expected_version: 0,
        scratchpad: {
          facts: [{ text: 'stolen', source_ref: `operation:${w.a.active}` }],
          refs: [{ id: `operation:${w.a.active}`, kind: 'operation' }],
        },
      },
      foreignIds: [w.a.active],
      refusedWith: { status: 400, code: 'validation_failed' },
    },
  ],
  'GET /v1/conversations/:conversationId/scratchpad/versions': (w) => [
    conversationAttack('GET', w, '/scratchpad/versions?limit=500'),
  ],
  'GET /v1/conversations/:conversationId/scratchpad/events': (w) => [
    conversationAttack('GET', w, '/scratchpad/events'),
  ],
  'PUT /v1/conversations/:conversationId/scratchpad/settings': (w) => [
    conversationAttack('PUT', w, '/scratchpad/settings', { reorganize_every: 0 }),
  ],
  'POST /v1/conversations/:conversationId/scratchpad/reorganize': (w) => [
    conversationAttack('POST', w, '/scratchpad/reorganize', { reason: 'intruder' }),
  ],
  'POST /v1/conversations/:conversationId/executions': (w) => [conversationAttack('POST', w, '/executions', {})],
  'POST /v1/executions/:executionId/end': (w) => [
    {
      label: "end A's execution",
      method: 'POST',
      path: `/v1/executions/${w.a.execution}/end`,
      foreignIds: [w.a.execution],
    },
  ],
  'GET /v1/executions/:executionId/traces': (w) => [
    {
      label: "A's execution traces",
      method: 'GET',
      path: `/v1/executions/${w.a.execution}/traces`,
      foreignIds: [w.a.execution],
    },
  ],
  'GET /v1/operations/:operationId': (w) =>
    [w.a.paused, w.a.active].map((id) => ({
      label: "A's operation",
      method: 'GET',
      path: `/v1/operations/${id}`,
      foreignIds: [id],
    })),
  'POST /v1/operations/:operationId/approval': (w) =>
    [w.a.paused, w.a.active].map((id) => ({
      label: "a decision on A's operation",
      method: 'POST',
      path: `/v1/operations/${id}/approval`,
      body: { decision: 'reject' },
      foreignIds: [id],
    })),
  'GET /v1/operations/:operationId/events': (w) =>
    [w.a.paused, w.a.active].map((id) => ({
      label: "A's operation events",
      method: 'GET',
      path: `/v1/operations/${id}/events`,
      foreignIds: [id],
    })),
  'GET /v1/operations/:operationId/results': (w) =>
    [w.a.paused, w.a.active].flatMap((id) =>
      ['', '?format=csv&status=failed'].map((query) => ({
        label: "A's operation results",
        method: 'GET',
        path: `/v1/operations/${id}/results${query}`,
        foreignIds: [id],
      })),
    ),
};

function conversationAttack(method: string, w: World, suffix: string, body?: unknown): Attack {
  return {
    label: `${method} ${suffix} of A's conversation`,
    method,
    path: `/v1/conversations/${w.a.conversation}${suffix}`,
    body,
    ownerGetsPast: true,
  };
}

/** Routes outside /v1 anyone may call. */
const PUBLIC_ROUTES = [
  'GET /',
  'GET /docs',
  'GET /docs/assets/:file',
  'GET /healthz',
  'GET /openapi.json',
  'GET /readyz',
];
/** Routes and mounts of the operator pages, behind basic auth. */
const OPERATOR_ROUTES = [
  'GET /admin/operations',
  'GET /admin/operations/:operationId',
  'GET /admin/operations/:operationId/cancel',
  'GET /admin/operations/assets/operator-view.js',
  'GET /admin/operations/stream',
  'POST /admin/operations/:operationId/:action',
  'GET /admin/approvals',
  'GET /admin/approvals/policy/:organization',
  'PUT /admin/approvals/policy/:organization',
  'POST /admin/approvals/:operationId/:decision',
  'GET /metrics',
  'GET /admin/organizations/:name/limits',
  'PUT /admin/organizations/:name/limits',
  'GET /admin/bulk-actions',
  'GET /admin/bulk-actions/:id',
  'POST /admin/bulk-actions',
  'POST /admin/bulk-actions/preview',
  'GET /admin/operations/bulk',
  'GET /admin/operations/bulk/:id',
  'POST /admin/operations/bulk',
];
const OPERATOR_MOUNTS = [
  '/admin/approvals',
  '/admin/bulk-actions',
  '/admin/operations',
  '/admin/organizations',
  '/admin/queues',
  '/metrics',
];
/**
 * MCP over Streamable HTTP and its metadata: their walls (another organization's session or
 * operation answers byte for byte as a random id) are test/integration/mcp-http.test.ts's.
 */
const MCP_ROUTES = ['DELETE /mcp', 'GET /.well-known/oauth-protected-resource/mcp', 'GET /mcp', 'POST /mcp'];

// ─── The test ────────────────────────────────────────────────────────────────────────────────

/** Upper-cases the A ids in an attack (ids are case-insensitive UUIDs). */
function upperCased(attack: Attack, world: World): Attack {
  const aIds = [world.a.conversation, world.a.paused, world.a.active, world.a.execution];
  const swap = (text: string) => aIds.reduce((t, id) => t.split(id).join(id.toUpperCase()), text);
  return {
    ...attack,
    label: `${attack.label} (upper-cased ids)`,
    path: swap(attack.path),
    body: attack.body === undefined ? undefined : JSON.parse(swap(JSON.stringify(attack.body))),
    headers: attack.headers && JSON.parse(swap(JSON.stringify(attack.headers))),
    foreignIds: attack.foreignIds?.map((id) => id.toUpperCase()),
  };
}

/** The same attack with each of `ids` replaced by a UUID that exists nowhere. */
function withUnknownIds(attack: Attack): { attack: Attack; replacements: Map<string, string> } {
  const replacements = new Map((attack.foreignIds ?? []).map((id) => [id, randomUUID()]));
  const swap = (text: string) => [...replacements].reduce((t, [from, to]) => t.split(from).join(to), text);
  return {
    attack: {
      ...attack,
      path: swap(attack.path),
      body: attack.body === undefined ? undefined : JSON.parse(swap(JSON.stringify(attack.body))),
      headers: attack.headers && JSON.parse(swap(JSON.stringify(attack.headers))),
    },
    replacements,
  };
}

describe('the tenant-walls table', () => {
  it('covers exactly the routes createApp registers, every tool and every action', () => {
    const registered = registeredRoutes();
    const v1 = registered.routes.filter((r) => r.split(' ')[1]?.startsWith('/v1/'));
    const others = registered.routes.filter((r) => !r.split(' ')[1]?.startsWith('/v1/'));
    expect(v1, 'a /v1 route is missing from ROUTE_ATTACKS (or the table names one that is gone)').toEqual(
      Object.keys(ROUTE_ATTACKS).sort(),
    );
    expect(others, 'a route outside /v1 is neither public, MCP, nor an operator page').toEqual(
      [...PUBLIC_ROUTES, ...MCP_ROUTES, ...OPERATOR_ROUTES].sort(),
    );
    expect(registered.mounts, 'something is mounted outside /v1 that is not an operator page').toEqual(OPERATOR_MOUNTS);
    expect(Object.keys(TOOL_ATTACKS).sort(), 'a tool is missing from TOOL_ATTACKS').toEqual([...TOOL_NAMES].sort());
    expect(Object.keys(operationActions(randomUUID())).sort(), 'an action is missing').toEqual(
      [...OPERATION_ACTIONS].sort(),
    );
  });
});

describe.each(ENGINES)('tenant walls on every route on %s', (engine: Engine) => {
  let harness: Harness;
  let client: RawClient;
  let orgA: Tenant;
  let orgB: Tenant;
  let world: World;
  /** Texts only A's rows hold. */
  let secrets: string[];

  beforeAll(async () => {
    harness = await startHarness(engine);
    client = rawClient(harness.url);
    orgA = await harness.newTenant();
    orgB = await harness.newTenant();
    world = await seed(harness.db, orgA, orgB);
    const marker = world.a.conversation.slice(0, 8);
    secrets = [
      `victim-sms-${marker}`,
      `victim-tag-${marker}`,
      `victim-reason-${marker}`,
      `victim-note-${marker}`,
      `victim-standing-${marker}`,
      `victim-fact-${marker}`,
      `victim-query-${marker}`,
      `victim-key-${marker}`,
      'victim-item-2',
      'victim-lead-1',
    ];
  });
  afterAll(async () => {
    client?.close();
    await harness?.close();
  });

  async function send(key: string, attack: Attack): Promise<RawResponse> {
    const request: RawRequest = {
      method: attack.method,
      path: attack.path,
      headers: { authorization: `Bearer ${key}`, ...attack.headers },
    };
    if (attack.body !== undefined) {
      request.body = JSON.stringify(attack.body);
      request.headers = { ...request.headers, 'content-type': 'application/json' };
    }
    return client.send(request);
  }

  /** What of the answer may differ between two ids: the ids themselves. */
  function normalized(response: RawResponse, ids: Iterable<string>): string {
    let text = response.text.toLowerCase();
    for (const id of ids) {
      text = text.split(id.toLowerCase()).join('<id>');
    }
    return `${response.status} ${text}`;
  }

  /** The answer with what differs between two conversations doing the same: ids, times, hashes. */
  function normalizedAnswer(response: RawResponse): string {
    const text = response.text
      .toLowerCase()
      .replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, '<uuid>')
      .replace(/\d{4}-\d{2}-\d{2}t\d{2}:\d{2}:\d{2}(\.\d+)?z/g, '<time>')
      .replace(/\b[0-9a-f]{64}\b/g, '<sha256>')
      .replace(/"id":\d+/g, '"id":<n>')
      // The context's size in tokens: the same text with other UUIDs tokenizes to other counts.
      .replace(/"tokens":\d+/g, '"tokens":<n>');
    return `${response.status} ${text}`;
  }

  async function expectWall(attack: Attack) {
    const response = await send(orgB.apiKey, attack);
    const label = `${attack.label}: ${attack.method} ${attack.path} ${JSON.stringify(attack.body ?? '')}`;
    const body = response.json as { error?: { code?: string; message?: string; details?: unknown } };
    const underAConversation = attack.path.toLowerCase().includes(world.a.conversation);
    if (underAConversation) {
      // B's own conversation: answered exactly as the same request to a conversation only B uses.
      const twin = await send(orgB.apiKey, {
        ...attack,
        path: attack.path.replace(new RegExp(world.a.conversation, 'gi'), world.b.twin),
      });
      expect(response.status, `${label} → ${response.text}`).toBeLessThan(500);
      expect(normalizedAnswer(response), label).toBe(normalizedAnswer(twin));
    } else {
      const refused = attack.refusedWith ?? { status: 404, code: 'not_found' };
      expect(response.status, `${label} → ${response.text}`).toBe(refused.status);
      expect(body.error?.code, label).toBe(refused.code);
      expect(Object.keys(body.error ?? {}).sort(), label).toEqual(['code', 'details', 'message']);
    }
    // None of A's data: no secret, and no id of A's the request did not name.
    const answer = response.text.toLowerCase();
    const asked = `${attack.path} ${JSON.stringify(attack.body ?? '')} ${JSON.stringify(attack.headers ?? {})}`;
    for (const text of [...secrets, world.a.paused, world.a.active, world.a.execution, world.a.conversation]) {
      if (!asked.toLowerCase().includes(text.toLowerCase())) {
        expect(answer, `${label} reveals "${text}"`).not.toContain(text.toLowerCase());
      }
    }
    // An id of A's is answered exactly as an id that exists nowhere.
    if (attack.foreignIds?.length) {
      const twin = withUnknownIds(attack);
      const unknown = await send(orgB.apiKey, twin.attack);
      expect(normalized(response, attack.foreignIds), label).toBe(normalized(unknown, twin.replacements.values()));
    }
  }

  it('has A data of every kind for B to aim at: rows in every table', async () => {
    const rows = await rowsPerTable(harness.db, orgA.organizationId);
    expect(Object.keys(rows).length).toBeGreaterThanOrEqual(13);
    for (const [table, count] of Object.entries(rows)) {
      expect(count, table).toBeGreaterThan(0);
    }
  });

  it.each(Object.keys(ROUTE_ATTACKS))("B's key gets 404, never A's data, on %s", async (route) => {
    const attacks = (ROUTE_ATTACKS[route] as (w: World) => Attack[])(world);
    const beforeA = await organizationDigest(harness.db, orgA.organizationId);
    const beforeB = await organizationDigest(harness.db, orgB.organizationId);
    if (route === 'GET /v1/tools') {
      const response = await send(orgB.apiKey, { label: 'tools', method: 'GET', path: '/v1/tools' });
      expect(response.status).toBe(200);
      for (const text of [...secrets, world.a.paused, world.a.conversation]) {
        expect(response.text).not.toContain(text);
      }
    } else {
      expect(attacks.length).toBeGreaterThan(0);
    }
    for (const attack of attacks) {
      await expectWall(attack);
      await expectWall(upperCased(attack, world));
    }
    expect(await organizationDigest(harness.db, orgA.organizationId)).toEqual(beforeA);
    // B's rows change only where B worked in conversations of its own.
    if (!attacks.some((attack) => attack.path.includes(world.a.conversation))) {
      expect(await organizationDigest(harness.db, orgB.organizationId)).toEqual(beforeB);
    }
  });

  it("A's own key gets past every request B was refused (the 404s are the wall's)", async () => {
    const owned = Object.values(ROUTE_ATTACKS)
      .flatMap((attacks) => attacks(world))
      .filter((attack) => attack.ownerGetsPast);
    expect(owned.length).toBeGreaterThan(30);
    // Read-only ones first; then the rest (they may change A's data: the walls are checked).
    for (const attack of [...owned.filter((a) => a.method === 'GET'), ...owned.filter((a) => a.method !== 'GET')]) {
      const response = await send(orgA.apiKey, attack);
      const label = `${attack.label} → ${response.text}`;
      expect(response.status, label).toBeLessThan(500);
      // Anything but "not found": an answer about A's data (a 404 no_active_operation included).
      expect((response.json as { error?: { code?: string } }).error?.code, label).not.toBe('not_found');
    }
    // And A's ids that B was refused resolve for A.
    for (const id of [world.a.paused, world.a.active]) {
      expect((await orgA.get(`/v1/operations/${id}`)).status).toBe(200);
    }
    expect((await orgA.get(`/v1/executions/${world.a.execution}/traces`)).status).toBe(200);
  });

  describe('API keys', () => {
    it('are stored as their SHA-256: no table holds a key, api_key holds its hash', async () => {
      for (const tenant of [orgA, orgB]) {
        const sha256 = createHash('sha256').update(tenant.apiKey, 'utf8').digest('hex');
        const rows = await harness.db.query<{ key_hash: string; key_prefix: string; row: string }>(
          'SELECT key_hash, key_prefix, to_jsonb(k)::text AS row FROM api_key k WHERE organization_id = $1',
          [tenant.organizationId],
        );
        expect(rows).toHaveLength(1);
        expect(rows[0]?.key_hash).toBe(sha256);
        expect(tenant.apiKey.startsWith(rows[0]?.key_prefix as string)).toBe(true);
        expect(tenant.apiKey.length - (rows[0]?.key_prefix.length ?? 0)).toBeGreaterThanOrEqual(32);
        // The secret part of the key, in any column of any table: nowhere.
        const secretPart = tenant.apiKey.slice(rows[0]?.key_prefix.length);
        const tables = await harness.db.query<{ table_name: string }>(
          `SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE'`,
        );
        expect(tables.length).toBeGreaterThan(5);
        for (const { table_name } of tables) {
          const [hit] = await harness.db.query<{ n: number }>(
            `SELECT count(*)::int AS n FROM "${table_name}" t WHERE strpos(to_jsonb(t)::text, $1) > 0`,
            [secretPart],
          );
          expect(hit?.n, `${table_name} holds the API key`).toBe(0);
        }
      }
    });

    it('a revoked key is refused with 401', async () => {
      const tenant = await harness.newTenant();
      const conversation = randomUUID();
      expect((await tenant.context(conversation)).status).toBe(200);
      expect(await revokeApiKey(harness.db, tenant.apiKey)).not.toBeNull();
      const refused = await tenant.context(conversation);
      expect(refused.status).toBe(401);
      expect((refused.body as unknown as { error: { code: string } }).error.code).toBe('unauthorized');
    });
  });

  describe('operator pages', () => {
    const operatorRequests = (w: World): RawRequest[] => [
      { method: 'GET', path: '/admin/queues' },
      { method: 'GET', path: '/admin/queues/api/queues' },
      { method: 'GET', path: '/metrics' },
      { method: 'GET', path: '/admin/operations' },
      { method: 'GET', path: `/admin/operations/${w.a.paused}` },
      { method: 'POST', path: `/admin/operations/${w.a.active}/cancel` },
      { method: 'PUT', path: '/admin/organizations/victim/limits' },
      { method: 'GET', path: '/admin/bulk-actions' },
      { method: 'POST', path: '/admin/bulk-actions/preview' },
      { method: 'POST', path: '/admin/bulk-actions' },
      { method: 'GET', path: '/admin/operations/bulk?action=pause&org=victim' },
      { method: 'POST', path: '/admin/operations/bulk' },
    ];

    it('answer 401 without credentials, with an API key as Bearer, and with a wrong password', async () => {
      const before = await organizationDigest(harness.db, orgA.organizationId);
      const wrong = `Basic ${Buffer.from('admin:not-the-password').toString('base64')}`;
      for (const request of operatorRequests(world)) {
        for (const authorization of [undefined, `Bearer ${orgA.apiKey}`, `Bearer ${orgB.apiKey}`, wrong]) {
          const response = await client.send({
            ...request,
            headers: {
              ...(authorization ? { authorization } : {}),
              origin: harness.url,
              referer: `${harness.url}/admin/operations`,
            },
          });
          const label = `${request.method} ${request.path} with ${authorization?.split(' ')[0] ?? 'nothing'}`;
          expect(response.status, label).toBe(401);
          expect(String(response.headers['www-authenticate']), label).toMatch(/^Basic /);
          expect(response.text, label).not.toContain('victim');
        }
      }
      expect(await organizationDigest(harness.db, orgA.organizationId)).toEqual(before);
    });

    it('open with the operator credentials', async () => {
      for (const request of operatorRequests(world).filter((r) => r.method === 'GET')) {
        const response = await client.send({ ...request, headers: { authorization: harness.adminAuthorization } });
        expect(response.status, `${request.path} → ${response.text.slice(0, 200)}`).toBe(200);
      }
    });
  });
});

/** A's data of every kind; B has a conversation of its own with an operation. */
async function seed(db: Database, orgA: Tenant, orgB: Tenant): Promise<World> {
  const conversation = randomUUID();
  const marker = conversation.slice(0, 8);
  const first = await orgA.op(conversation, {
    action: 'create',
    operation_type: `victim-sms-${marker}`,
    total_items: 4,
    item_ids: ['victim-item-1', 'victim-item-2', 'victim-item-3', 'victim-item-4'],
    query_params: { tag: `victim-query-${marker}` },
  });
  expect(first.status, JSON.stringify(first.body)).toBe(200);
  const paused = first.body.operation_id as string;
  await orgA.op(conversation, {
    action: 'update',
    operation_id: paused,
    completed_ids: ['victim-item-1'],
    failed: [{ id: 'victim-item-2', reason: `victim-reason-${marker}` }],
  });
  const second = await orgA.op(conversation, {
    action: 'create',
    operation_type: `victim-tag-${marker}`,
    total_items: 6,
    item_ids: ids(6, 'victim-lead'),
    batch_size: 3,
  });
  const active = second.body.operation_id as string;
  expect((await orgA.op(conversation, { action: 'progress' })).body.batch).toHaveLength(3);

  const execution = await orgA.post(`/v1/conversations/${conversation}/executions`);
  expect(execution.status).toBe(201);
  const executionId = execution.body.execution_id as string;
  const headers = { 'x-opspad-execution': executionId };
  expect(
    (await orgA.tool(conversation, { notes: `victim-note-${marker}` }, 'write_to_scratchpad', headers)).status,
  ).toBe(200);
  await orgA.tool(conversation, { persistent_notes: `victim-standing-${marker}` }, 'read_from_scratchpad', headers);
  const pad = await orgA.tool(
    conversation,
    {
      task: 'victim task',
      add: {
        facts: [{ text: `victim-fact-${marker}`, source_ref: `item:${paused}:victim-item-2` }],
        refs: [{ id: `item:${paused}:victim-item-2`, kind: 'item' }],
      },
    },
    'update_scratchpad',
  );
  expect(pad.status, JSON.stringify(pad.body)).toBe(200);
  expect((await orgA.post(`/v1/conversations/${conversation}/scratchpad/reorganize`, {})).status).toBe(200);
  expect((await orgA.context(conversation)).status).toBe(200);

  // A finished operation whose items retention pruned, one failure kept (the statements
  // retention runs, on this operation alone: the database is shared with other files).
  const done = randomUUID();
  const finished = await orgA.op(done, {
    action: 'create',
    operation_type: `victim-done-${marker}`,
    total_items: 2,
    item_ids: ['victim-done-1', 'victim-done-2'],
  });
  const finishedId = finished.body.operation_id as string;
  await orgA.op(done, {
    action: 'update',
    operation_id: finishedId,
    completed_ids: ['victim-done-1'],
    failed: [{ id: 'victim-done-2', reason: `victim-kept-${marker}` }],
  });
  expect((await orgA.op(done, { action: 'complete', operation_id: finishedId })).status).toBe(200);
  await db.transaction(async (tx) => {
    await deleteItemRange(tx, finishedId, 0, 2, null);
    await saveOperationProgress(tx, finishedId, 'items', {
      through: 2,
      done: true,
      prunedFailures: EMPTY_PRUNED_FAILURES,
    });
  });

  // An operator's bulk action that took the finished operation (and skipped it: it was completed).
  const [organizationA] = await db.query<{ name: string }>('SELECT name FROM organization WHERE id = $1', [
    orgA.organizationId,
  ]);
  const bulk = await createBulkAction(db, {
    action: 'pause',
    filter: { org: organizationA?.name, type: `victim-done-${marker}` },
    actor: 'operator:test',
    maxOperations: 10,
  });
  expect(bulk.matched).toBe(1);
  await db.query(
    `UPDATE operator_bulk_action_target SET state = 'skipped', detail = 'it is completed: it cannot be paused'
     WHERE bulk_action_id = $1`,
    [bulk.id],
  );
  await db.query(`UPDATE operator_bulk_action SET status = 'done', skipped = 1, finished_at = now() WHERE id = $1`, [
    bulk.id,
  ]);

  // What hosted MCP clients hold for A: a session, and an OAuth grant with a live code and one
  // with tokens (the routes that touch them are /mcp's: mcp-http.test.ts).
  await openMcpSession(
    db,
    orgA.organizationId,
    { homeConversationId: conversation, pinned: false, clientName: `victim-client-${marker}` },
    { maxSessions: 10, idleMs: 3_600_000 },
  );
  const clientId = randomUUID();
  await registerOAuthClient(db, clientId, { client_id: clientId, redirect_uris: ['http://127.0.0.1/cb'] });
  const grant = {
    clientId,
    organizationId: orgA.organizationId,
    resource: 'http://127.0.0.1/mcp',
    grantedBy: 'operator:test',
    codeChallenge: 'challenge',
    redirectUri: 'http://127.0.0.1/cb',
  };
  await grantOAuthClient(db, grant);
  const spent = await grantOAuthClient(db, grant);
  await exchangeOAuthCode(db, { clientId, code: spent.code }, { accessMs: 3_600_000, refreshMs: 3_600_000 });
  // A's own provider limit for a key B's operations could compute too, and A's active operation
  // throttled at it.
  await db.transaction((tx) =>
    setKeyLimit(tx, orgA.organizationId, { operation_type: 'send_sms', key: `victim-key-${marker}`, concurrency: 1 }),
  );
  await noteThrottled(db, {
    operationId: active,
    key: `victim-key-${marker}`,
    limitedBy: 'concurrency',
    limits: { concurrency: 1 },
    untilMs: Date.now() + 3_600_000,
  });

  const conversationB = randomUUID();
  const own = await orgB.op(conversationB, {
    action: 'create',
    operation_type: 'own_work',
    total_items: 2,
    item_ids: ['b-1', 'b-2'],
  });
  expect(own.status).toBe(200);
  return {
    a: { conversation, paused, active, execution: executionId },
    b: { conversation: conversationB, twin: randomUUID() },
  };
}
