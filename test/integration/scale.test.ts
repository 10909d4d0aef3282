/**
 * A million items, on real Postgres: the create streams them in over HTTP, and leasing and
 * recording a batch touch O(batch) database pages whatever the operation's size. Pages, not
 * milliseconds, are asserted: they are deterministic, and a scan that walks finished rows would
 * multiply them by thousands (npm run bench measures the time).
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LEASE_NEXT_SQL, RECORD_COMPLETED_SQL, RECORD_FAILED_SQL } from '../../src/store/leases/item-sql.ts';
import { type Harness, startHarness, type Tenant } from '../helpers/harness.ts';
import { ITEM_STATES } from '../helpers/item-states.ts';

const N = 1_000_000;
/** Heap page plus a descent of each index per row (measured ~15-18 at this size). */
const PAGES_PER_ITEM = 30;

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Shared Hit Blocks': number;
  'Shared Read Blocks': number;
  Plans?: PlanNode[];
}

function walk(node: PlanNode, visit: (node: PlanNode) => void): void {
  visit(node);
  for (const child of node.Plans ?? []) {
    walk(child, visit);
  }
}

describe('an operation of 1,000,000 items (postgres)', () => {
  let harness: Harness;
  let tenant: Tenant;
  const conversation = randomUUID();
  let operationId: string;

  beforeAll(async () => {
    harness = await startHarness('postgres');
    tenant = await harness.newTenant();
  });
  afterAll(async () => {
    await harness.close();
  });

  /** Runs EXPLAIN ANALYZE in a transaction that is rolled back; returns pages touched and nodes. */
  async function explain(sql: string, params: unknown[]) {
    return harness.db
      .transaction(async (tx) => {
        const rows = await tx.query<{ 'QUERY PLAN': [{ Plan: PlanNode }] }>(
          `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${sql}`,
          params,
        );
        const plan = rows[0]?.['QUERY PLAN'][0].Plan as PlanNode;
        const nodes: string[] = [];
        walk(plan, (n) => {
          nodes.push(`${n['Node Type']}${n['Relation Name'] ? ` on ${n['Relation Name']}` : ''}`);
        });
        const pages = plan['Shared Hit Blocks'] + plan['Shared Read Blocks'];
        throw Object.assign(new Error('rollback'), { result: { pages, nodes } });
      })
      .catch((error: { result?: { pages: number; nodes: string[] } }) => {
        if (!error.result) {
          throw error;
        }
        return error.result;
      });
  }

  it('creates the operation in one request, every id in its own row', async () => {
    const itemIds = Array.from({ length: N }, (_, i) => `item-${i}`);
    const created = await tenant.op(conversation, {
      action: 'create',
      operation_type: 'bulk_tag',
      total_items: N,
      item_ids: itemIds,
      batch_size: 100,
    });
    expect(created.status).toBe(200);
    expect(created.body).toMatchObject({ total_items: N, batch_size: 100 });
    operationId = created.body.operation_id as string;
    const rows = await harness.db.query<{ n: number; max: number }>(
      'SELECT count(*)::int AS n, max(ordinal) AS max FROM assistant_operation_item WHERE operation_id = $1',
      [operationId],
    );
    expect(rows[0]).toEqual({ n: N, max: N - 1 });
  });

  it('is leased and recorded through the right index as soon as the create has answered', async () => {
    // No ANALYZE here: the create refreshed the statistics before answering. Without them the
    // planner takes the new operation for a small one and walks all of its 1,000,000 index
    // entries for every lease and record.
    const lease = await explain(LEASE_NEXT_SQL, [operationId, 'fresh', 60, 0, 100, true]);
    expect(lease.pages / 100).toBeLessThan(PAGES_PER_ITEM);
    const batch = Array.from({ length: 100 }, (_, i) => `item-${i}`);
    const record = await explain(RECORD_COMPLETED_SQL, [operationId, batch, 'fresh']);
    expect(record.pages / 100).toBeLessThan(PAGES_PER_ITEM);
  });

  it('leases the next batch by reading a few pages, even after most items are finished', async () => {
    // Finish the first 900,000 items as workers would have, and move the cursor past them.
    await harness.db.query(
      `UPDATE assistant_operation_item SET status = 'completed' WHERE operation_id = $1 AND ordinal < 900000`,
      [operationId],
    );
    await harness.db.query(
      `UPDATE assistant_operation SET completed_count = 900000,
         state_json = jsonb_set(state_json, '{cursor}', '900000') WHERE id = $1`,
      [operationId],
    );
    await harness.db.query('VACUUM ANALYZE assistant_operation_item');

    // The lease is a function (opspad_lease_items): its statements' pages are counted in the
    // plan's one node. Each leased row costs its heap page and its index entries.
    const lease = await explain(LEASE_NEXT_SQL, [operationId, 'w', 60, 900000, 100, false]);
    expect(lease.pages / 100).toBeLessThan(PAGES_PER_ITEM);

    // The same statement from ordinal 0 (the caller holding the operation alone, so the scan
    // starts where it is told) walks every finished entry: the check above is sensitive to
    // exactly the mistake it guards against.
    const unbounded = await explain(LEASE_NEXT_SQL, [operationId, 'w', 60, 0, 100, false]);
    expect(unbounded.pages).toBeGreaterThan(lease.pages * 20);
  });

  it('records a 1,000-item batch by touching pages in proportion to the batch', async () => {
    const batch = Array.from({ length: 1000 }, (_, i) => `item-${900000 + i}`);
    const completed = await explain(RECORD_COMPLETED_SQL, [operationId, batch, 'w']);
    expect(completed.nodes.join(' | ')).not.toMatch(/Seq Scan on assistant_operation_item/);
    expect(completed.pages / 1000).toBeLessThan(PAGES_PER_ITEM);

    const failed = await explain(RECORD_FAILED_SQL, [operationId, batch, 'w', batch.map((id) => `reason ${id}`)]);
    expect(failed.nodes.join(' | ')).not.toMatch(/Seq Scan on assistant_operation_item/);
    expect(failed.pages / 1000).toBeLessThan(PAGES_PER_ITEM);
  });

  it('leases and records in one call each by touching pages in proportion to the batch', async () => {
    // Server-side calls keep their statements' plans for the session, and may switch to a
    // generic plan after five runs: the ninth call, on one connection, must still read by index.
    const scope = [tenant.organizationId, conversation];
    const pages = await harness.db
      .transaction(async (tx) => {
        let leased: string[] = [];
        for (let i = 0; i < 8; i++) {
          const rows = await tx.query<{ item_ids: string[] }>(
            'SELECT item_ids FROM opspad_lease_step($1, $2, $3, $4, 60, 100, NULL)',
            [operationId, ...scope, `step-${i}`],
          );
          leased = rows[0]?.item_ids ?? [];
          await tx.query('SELECT 1 FROM opspad_record_step($1, $2, $3, $4, $5, NULL, false)', [
            operationId,
            ...scope,
            `step-${i}`,
            leased,
          ]);
        }
        expect(leased).toHaveLength(100);
        const explainPages = async (call: string, params: unknown[]) => {
          const rows = await tx.query<{ 'QUERY PLAN': [{ Plan: PlanNode }] }>(
            `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) SELECT * FROM ${call}`,
            params,
          );
          const plan = rows[0]?.['QUERY PLAN'][0].Plan as PlanNode;
          return plan['Shared Hit Blocks'] + plan['Shared Read Blocks'];
        };
        const lease = await explainPages('opspad_lease_step($1, $2, $3, $4, 60, 100, NULL)', [
          operationId,
          ...scope,
          'step-last',
        ]);
        const ids = await tx.query<{ item_id: string }>(
          `SELECT item_id FROM (${ITEM_STATES}) i WHERE operation_id = $1 AND lease_owner = 'step-last'`,
          [operationId],
        );
        const record = await explainPages('opspad_record_step($1, $2, $3, $4, $5, NULL, false)', [
          operationId,
          ...scope,
          'step-last',
          ids.map((r) => r.item_id),
        ]);
        expect(ids).toHaveLength(100);
        throw Object.assign(new Error('rollback'), { pages: { lease, record } });
      })
      .catch((error: { pages?: { lease: number; record: number } }) => {
        if (!error.pages) {
          throw error;
        }
        return error.pages;
      });
    expect(pages.lease / 100).toBeLessThan(PAGES_PER_ITEM);
    expect(pages.record / 100).toBeLessThan(PAGES_PER_ITEM);
  });

  it('serves progress and update through the tool at this size', async () => {
    const progress = await tenant.op<{ batch: string[]; remaining_count: number }>(conversation, {
      action: 'progress',
    });
    expect(progress.body.batch).toHaveLength(100);
    expect(progress.body.batch[0]).toBe('item-900000');
    expect(progress.body.remaining_count).toBe(100000);
    const update = await tenant.op(conversation, {
      action: 'update',
      operation_id: operationId,
      completed_ids: progress.body.batch,
    });
    expect(update.body).toMatchObject({ completed_count: 900100, remaining_count: 99900, in_flight_count: 0 });
  });
});
