/**
 * A large create refreshes the planner's statistics of the item table from a sample sized to it
 * (store/operations/operation-create.ts analyzeAfterLargeCreate), so that the first leases of the new
 * operation are planned for its size.
 *
 * The database is this file's own and its item table holds only what these tests put there.
 * ANALYZE samples pages, then rows from them: in test/integration/create-stream.test.ts's table,
 * where aborted creates had left 2,180,000 dead rows beside 1,480,000 live ones (autovacuum is off
 * here), a 3,000-row sample met the new operation on about four pages, and its estimate moved in
 * steps of a quarter of its size (44,039 for 20,000 rows once in CI).
 */

import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPostgresDatabase } from '../../src/store/db/db.ts';
import { analyzeAfterLargeCreate } from '../../src/store/operations/operation-create.ts';
import { type Harness, ids, startHarness, type Tenant } from '../helpers/harness.ts';
import { type PrivateDatabase, privatePostgresDatabase } from '../helpers/private-database.ts';

function createInput(itemIds: readonly string[]) {
  return { action: 'create', operation_type: 'bulk_tag', total_items: itemIds.length, item_ids: itemIds };
}

describe('a large create refreshes the planner’s statistics from a sample sized to it (Postgres)', () => {
  let database: PrivateDatabase;
  let harness: Harness;
  let tenant: Tenant;

  beforeAll(async () => {
    database = await privatePostgresDatabase('create_statistics');
    harness = await startHarness('postgres', { databaseUrl: database.url });
    tenant = await harness.newTenant();
  }, 60_000);

  afterAll(async () => {
    await harness?.close();
    await database?.drop();
  });

  /** Creates an operation of `itemIds` over HTTP; its id. */
  async function create(itemIds: readonly string[]): Promise<string> {
    const response = await tenant.op(randomUUID(), createInput(itemIds));
    expect(response.status).toBe(200);
    return String((response.body as { operation_id: unknown }).operation_id);
  }

  /** The number of entries in the list of `operation_id`'s most common values. */
  async function commonValues(): Promise<number | undefined> {
    const stats = await harness.db.query<{ n: number }>(
      `SELECT cardinality(most_common_vals::text::text[]) AS n FROM pg_stats
       WHERE tablename = 'assistant_operation_item' AND attname = 'operation_id' AND schemaname = current_schema()`,
    );
    return stats[0]?.n;
  }

  /**
   * Runs `fn` with `count` other operations of `rows` items each in the item table (rows only:
   * the table has no foreign key to the operation), removed afterwards; their ids are numbered
   * from `first`.
   */
  async function withOtherOperations(count: number, rows: number, fn: () => Promise<void>, first = 1): Promise<void> {
    const others = `SELECT ('00000000-0000-4000-8000-' || lpad(o::text, 12, '0'))::uuid AS operation_id, n AS ordinal
      FROM generate_series(${first}, ${first + count - 1}) o, generate_series(0, ${rows - 1}) n`;
    await harness.db.query(
      `INSERT INTO assistant_operation_item (operation_id, ordinal, item_id) SELECT operation_id, ordinal, 'x' || ordinal FROM (${others}) s`,
    );
    try {
      await fn();
    } finally {
      await harness.db.query(
        `DELETE FROM assistant_operation_item WHERE operation_id IN (SELECT DISTINCT operation_id FROM (${others}) s)`,
      );
    }
  }

  /** The planner's estimate of an operation's item rows. */
  async function estimatedRows(operationId: unknown): Promise<number> {
    const plan = await harness.db.query<{ 'QUERY PLAN': [{ Plan: { 'Plan Rows': number } }] }>(
      `EXPLAIN (FORMAT JSON) SELECT * FROM assistant_operation_item WHERE operation_id = '${String(operationId)}'`,
    );
    return plan[0]?.['QUERY PLAN'][0].Plan['Plan Rows'] ?? 0;
  }

  it('answers once the planner knows the new operation’s size, from a small sample', async () => {
    // Fifty operations of 4,000 rows, refreshed in full: each is among the column's common values.
    await withOtherOperations(50, 4_000, async () => {
      await harness.db.query('ANALYZE assistant_operation_item');
      const operationId = await create(ids(20_000));
      // About one without the refresh: the full pass above counted fifty operations, not this one.
      const estimate = await estimatedRows(operationId);
      expect(estimate).toBeGreaterThan(10_000);
      expect(estimate).toBeLessThan(40_000);
      // The refresh read 3,000 rows (statistics target 10), not 30,000: its list of common values,
      // 50 long after the full pass above, holds at most ten.
      expect(await commonValues()).toBeLessThanOrEqual(10);
    });
  }, 60_000);

  it('never samples more than the server is set to', async () => {
    // A server (here: its sessions) set to a target of 5: the refresh keeps at most 5 common
    // values, where its own floor of 10 would keep 10 of the 20 operations far larger than the rest.
    const url = new URL(database.url);
    url.searchParams.set('options', '-c default_statistics_target=5');
    const db = createPostgresDatabase({ connectionString: url.toString(), poolSize: 1 });
    try {
      await withOtherOperations(2_000, 5, () =>
        withOtherOperations(
          20,
          4_000,
          async () => {
            await analyzeAfterLargeCreate(db, 10_000);
            const n = await commonValues();
            expect(n).toBeLessThanOrEqual(5);
            expect(n).toBeGreaterThan(0);
          },
          3_001,
        ),
      );
    } finally {
      await db.close();
    }
  }, 60_000);

  it('keeps every large active operation among the planner’s common values, more than ten of them', async () => {
    // Two thousand small operations, so that one left out of the common values is planned as small.
    await withOtherOperations(2_000, 5, async () => {
      const created: unknown[] = [];
      for (let i = 0; i < 12; i++) {
        created.push(await create(ids(10_000, `large-${i}`)));
      }
      for (const operationId of created) {
        // Each is estimated from the few hundred of its rows the sample holds (8,300–12,300 in
        // runs of this file); left out of the common values, an operation is estimated at about 100.
        expect(await estimatedRows(operationId)).toBeGreaterThan(5_000);
      }
    });
  }, 120_000);
});
