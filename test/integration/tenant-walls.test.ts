/**
 * Walls between tenants, on real Postgres and on PGlite. A conversation is (organization, id):
 * another organization's key that uses the same conversation id works in a conversation of its
 * own — its context is that of an unused id, its actions never reach the owner's operations —
 * and it gets 404 not_found for an operation id it did not create; the owner's data is exactly as
 * before. Operations are also scoped to their conversation: the owner's own id is not found from
 * another conversation.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ENGINES, type Harness, type HttpResult, ids, startHarness, type Tenant } from '../helpers/harness.ts';
import { ITEM_STATES } from '../helpers/item-states.ts';

interface ErrorResponse {
  error: { code: string; message: string; details: Record<string, unknown> };
}

/** Everything organization `organizationId` has in the database, rows and counters. */
async function snapshot(harness: Harness, organizationId: string) {
  const conversations = await harness.db.query(
    'SELECT id FROM assistant_conversation WHERE organization_id = $1 ORDER BY id',
    [organizationId],
  );
  const operations = await harness.db.query(
    `SELECT id, conversation_id, status, total_items, completed_count, failed_count, state_json, updated_at
     FROM assistant_operation WHERE organization_id = $1 ORDER BY id`,
    [organizationId],
  );
  const items = await harness.db.query(
    `SELECT i.operation_id, i.ordinal, i.status, i.attempts, i.lease_owner, i.lease_expires_at, i.reason
     FROM (${ITEM_STATES}) i JOIN assistant_operation o ON o.id = i.operation_id
     WHERE o.organization_id = $1 ORDER BY i.operation_id, i.ordinal`,
    [organizationId],
  );
  const events = await harness.db.query(
    'SELECT id, operation_id, kind FROM operation_event WHERE organization_id = $1 ORDER BY id',
    [organizationId],
  );
  return { conversations, operations, items, events };
}

function expectNotFound(response: HttpResult, label: string): ErrorResponse['error'] {
  expect(response.status, `${label}: ${JSON.stringify(response.body)}`).toBe(404);
  const { error } = response.body as unknown as ErrorResponse;
  expect(error.code, label).toBe('not_found');
  expect(typeof error.message).toBe('string');
  return error;
}

describe.each(ENGINES)('tenant walls on %s', (engine) => {
  let harness: Harness;
  let orgA: Tenant;
  let orgB: Tenant;
  /** A's conversation: `pausedId` (one failure, paused) and `activeId` (a batch in flight). */
  let conversationC: string;
  let pausedId: string;
  let activeId: string;
  let contextBefore: string;

  beforeAll(async () => {
    harness = await startHarness(engine);
    orgA = await harness.newTenant();
    orgB = await harness.newTenant();
    conversationC = randomUUID();

    const first = await orgA.op(conversationC, {
      action: 'create',
      operation_type: 'send_sms',
      total_items: 4,
      item_ids: ids(4),
    });
    pausedId = first.body.operation_id as string;
    await orgA.op(conversationC, {
      action: 'update',
      operation_id: pausedId,
      completed_ids: ['contact-1'],
      failed: [{ id: 'contact-2', reason: 'invalid phone number' }],
    });
    const second = await orgA.op(conversationC, {
      action: 'create',
      operation_type: 'tag_contacts',
      total_items: 6,
      item_ids: ids(6, 'lead'),
      batch_size: 3,
    });
    activeId = second.body.operation_id as string;
    expect(second.body.paused_operation_id).toBe(pausedId);
    const batch = await orgA.op(conversationC, { action: 'progress' });
    expect(batch.body.batch).toEqual(['lead-1', 'lead-2', 'lead-3']);
    contextBefore = (await orgA.context(conversationC)).body.text;
    expect(contextBefore).toContain(activeId);
    expect(contextBefore).toContain(pausedId);
  });
  afterAll(async () => {
    await harness.close();
  });

  /** Runs `attack` and checks that A's data did not change (and B's too, unless `bMayChange`). */
  async function withoutSideEffects(attack: () => Promise<void>, { bMayChange = false } = {}) {
    const beforeA = await snapshot(harness, orgA.organizationId);
    const beforeB = await snapshot(harness, orgB.organizationId);
    await attack();
    expect(await snapshot(harness, orgA.organizationId)).toEqual(beforeA);
    if (!bMayChange) {
      expect(await snapshot(harness, orgB.organizationId)).toEqual(beforeB);
    }
    expect((await orgA.context(conversationC)).body.text).toBe(contextBefore);
  }

  /** Every action, aimed at `operationId` where the action takes one. */
  function everyAction(operationId: string) {
    return [
      { action: 'create', operation_type: 'steal', total_items: 2, item_ids: ['x', 'y'] },
      { action: 'progress' },
      { action: 'progress', operation_id: operationId, lease_owner: 'intruder' },
      { action: 'get' },
      { action: 'get', operation_id: operationId },
      { action: 'update', operation_id: operationId, completed_ids: ['lead-4'] },
      { action: 'update', operation_id: operationId, failed: [{ id: 'contact-3', reason: 'x' }] },
      { action: 'pause' },
      { action: 'pause', operation_id: operationId },
      { action: 'resume', operation_id: operationId },
      { action: 'cancel', operation_id: operationId },
      { action: 'complete', operation_id: operationId, force: true },
      { action: 'retry_failed', operation_id: operationId },
    ];
  }

  it("B's context for A's conversation id is exactly the context of an id nobody used", async () => {
    await withoutSideEffects(async () => {
      const context = await orgB.context(conversationC);
      expect(context.status).toBe(200);
      expect(context).toEqual(await orgB.context(randomUUID()));
      expect(JSON.stringify(context.body)).not.toMatch(new RegExp(`${activeId}|${pausedId}|send_sms|tag_contacts`));
    });
  });

  it("B's actions under A's conversation id happen in B's own conversation and never reach A's", async () => {
    await withoutSideEffects(
      async () => {
        for (const operationId of [activeId, pausedId]) {
          for (const input of everyAction(operationId)) {
            const response = await orgB.op(conversationC, input);
            // The answer never reveals A's data.
            expect(JSON.stringify(response.body), JSON.stringify(input)).not.toMatch(
              /send_sms|tag_contacts|lead-|contact-/,
            );
            if ('operation_id' in input) {
              const error = expectNotFound(response, JSON.stringify(input));
              expect(error.details).toEqual({ operation_id: operationId });
            }
          }
        }
      },
      { bMayChange: true },
    );
    // What B created is B's: A's conversation still holds exactly A's two operations.
    const rows = await harness.db.query<{ organization_id: string; id: string; operation_type: string }>(
      'SELECT organization_id, id, operation_type FROM assistant_operation WHERE conversation_id = $1',
      [conversationC],
    );
    expect(
      rows
        .filter((r) => r.organization_id === orgA.organizationId)
        .map((r) => r.id)
        .sort(),
    ).toEqual([activeId, pausedId].sort());
    const ofB = rows.filter((r) => r.organization_id === orgB.organizationId);
    expect(ofB.length).toBeGreaterThan(0);
    expect(new Set(ofB.map((r) => r.operation_type))).toEqual(new Set(['steal']));
  });

  it("B gets 404 not_found for A's operation ids inside B's own conversation", async () => {
    const conversationB = randomUUID();
    const own = await orgB.op(conversationB, {
      action: 'create',
      operation_type: 'own_work',
      total_items: 2,
      item_ids: ['b-1', 'b-2'],
    });
    expect(own.status).toBe(200);
    await withoutSideEffects(async () => {
      for (const operationId of [activeId, pausedId]) {
        for (const input of everyAction(operationId).filter((i) => 'operation_id' in i)) {
          const error = expectNotFound(await orgB.op(conversationB, input), JSON.stringify(input));
          expect(error.details).toEqual({ operation_id: operationId });
        }
      }
    });
    // B's own operation is still its active one.
    const progress = await orgB.op(conversationB, { action: 'progress' });
    expect(progress.body).toMatchObject({ operation_id: own.body.operation_id, batch: ['b-1', 'b-2'] });
  });

  it("A's operation ids are not found from another of A's conversations", async () => {
    const otherConversation = randomUUID();
    await orgA.op(otherConversation, { action: 'create', operation_type: 'other', total_items: 1, item_ids: ['o-1'] });
    await withoutSideEffects(async () => {
      for (const operationId of [activeId, pausedId]) {
        for (const input of everyAction(operationId).filter((i) => 'operation_id' in i)) {
          const error = expectNotFound(await orgA.op(otherConversation, input), JSON.stringify(input));
          expect(error.message).toContain(`Operation ${operationId} was not found in this conversation`);
        }
      }
    });
  });

  it("A's operations are untouched and still work for A", async () => {
    const active = await orgA.op(conversationC, { action: 'get', operation_id: activeId });
    expect(active.body).toMatchObject({
      status: 'active',
      completed_count: 0,
      failed_count: 0,
      in_flight_count: 3,
      remaining_count: 6,
    });
    const paused = await orgA.op(conversationC, { action: 'get', operation_id: pausedId });
    expect(paused.body).toMatchObject({
      status: 'paused',
      completed_count: 1,
      failed_count: 1,
      remaining_count: 2,
      failures: [{ id: 'contact-2', reason: 'invalid phone number' }],
    });
    const sameBatch = await orgA.op(conversationC, { action: 'progress' });
    expect(sameBatch.body.batch).toEqual(['lead-1', 'lead-2', 'lead-3']);
    const rows = await harness.db.query<{ id: string }>(
      'SELECT id FROM assistant_operation WHERE conversation_id = $1 AND organization_id = $2 ORDER BY id',
      [conversationC, orgA.organizationId],
    );
    expect(rows.map((r) => r.id)).toEqual([activeId, pausedId].sort());
  });
});
