/**
 * Lists never carry query_params out of the database: the operator page (200 operations every
 * 5 s), the reconciler's pass and the context fragment read what they show, not the up to
 * OPSPAD_MAX_QUERY_PARAMS_BYTES each operation may hold — which made three loads of the operator
 * page push a server from 459 MB to 2 GB. An operation's own read (`get`) still returns them.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  getOperatorOperation,
  listActiveBackgroundOperationsAllOrganizations,
  listOpenOperations,
  listOperatorOperations,
  operatorRowsByIds,
} from '../../src/store/index.ts';
import { type Harness, ids, startHarness, type Tenant } from '../helpers/harness.ts';

describe('list queries (postgres)', () => {
  let harness: Harness;
  let tenant: Tenant;
  let organizationName: string;
  const conversation = randomUUID();
  const marker = `filter-${randomUUID()}`;
  const queryParams = { marker, padding: 'q'.repeat(16_000), latency_ms: 60_000 };
  let operationId: string;

  beforeAll(async () => {
    harness = await startHarness('postgres');
    tenant = await harness.newTenant();
    const created = await tenant.op(conversation, {
      action: 'create',
      operation_type: 'demo',
      execution: 'background',
      total_items: 3,
      item_ids: ids(3),
      query_params: queryParams,
      notes: 'shown in the context',
    });
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    operationId = created.body.operation_id as string;
    const [row] = await harness.db.query<{ name: string }>('SELECT name FROM organization WHERE id = $1', [
      tenant.organizationId,
    ]);
    organizationName = row?.name as string;
  });
  afterAll(async () => {
    await harness.close();
  });

  it('the context fragment reads open operations without their query_params, with their notes', async () => {
    const page = await listOpenOperations(
      harness.db,
      { organizationId: tenant.organizationId, conversationId: conversation },
      50,
    );
    expect(page.operations.map((op) => op.id)).toEqual([operationId]);
    expect(page.operations[0]?.state_json).not.toHaveProperty('query_params');
    expect(page.operations[0]?.state_json).toMatchObject({ notes: 'shown in the context', execution: 'background' });
    const context = await tenant.context(conversation);
    expect(context.body.text).toContain('shown in the context');
    expect(JSON.stringify(context.body)).not.toContain(marker);
  });

  it('the operator page lists operations without their query_params', async () => {
    const { rows } = await listOperatorOperations(harness.db, { organizationName }, { limit: 100 });
    expect(rows.map((op) => op.id)).toEqual([operationId]);
    expect(rows[0]).toMatchObject({ organization_name: organizationName, in_flight_count: 0, total_items: 3 });
    // The rows the page and its live updates read, and the operation's own page: no query_params.
    for (const row of [...rows, ...(await operatorRowsByIds(harness.db, [operationId]))]) {
      expect(JSON.stringify(row)).not.toContain(marker);
    }
    expect(JSON.stringify(await getOperatorOperation(harness.db, operationId))).not.toContain(marker);
    const html = await fetch(`${harness.url}/admin/operations?org=${encodeURIComponent(organizationName)}`, {
      headers: { authorization: harness.adminAuthorization },
    });
    expect(html.status).toBe(200);
    const text = await html.text();
    expect(text).toContain(operationId);
    expect(text).not.toContain(marker);
    const detail = await fetch(`${harness.url}/admin/operations/${operationId}`, {
      headers: { authorization: harness.adminAuthorization },
    });
    expect(await detail.text()).not.toContain(marker);
  });

  it('the reconciler lists active background operations without their query_params', async () => {
    const prefix = (
      await harness.db.query<{ prefix: string }>(
        `SELECT state_json->>'queue_prefix' AS prefix FROM assistant_operation WHERE id = $1`,
        [operationId],
      )
    )[0]?.prefix as string;
    const own = await listActiveBackgroundOperationsAllOrganizations(
      harness.db,
      prefix,
      '00000000-0000-0000-0000-000000000000',
      200,
    );
    const mine = own.find((r) => r.operation.id === operationId);
    expect(mine).toMatchObject({ organizationId: tenant.organizationId, conversationId: conversation });
    expect(mine?.operation.state_json).not.toHaveProperty('query_params');
    expect(mine?.operation.state_json).toMatchObject({ execution: 'background', dispatch_epoch: 1 });
  });

  it("the operation's own read still returns its query_params", async () => {
    const get = await tenant.op(conversation, { action: 'get', operation_id: operationId });
    expect(get.body.query_params).toEqual(queryParams);
  });
});
