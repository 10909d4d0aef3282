/**
 * Every statement retention runs costs O(its batch), whatever the tables hold: checked with
 * EXPLAIN (ANALYZE, BUFFERS) on real Postgres, in transactions that are rolled back. The tables
 * hold what a long-lived deployment has — 20,000 operations, executions and pads retention has
 * already visited, an operation of 100,000 items with 20,000 events, 20,000 context renders — and
 * each statement must read its index (not scan the table) and touch a number of pages in
 * proportion to the rows it handles. Pages, not milliseconds: they are deterministic.
 *
 * A database of this file's own: the bulk rows must not meet other files' retention, or theirs.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BULK_EVENT_KINDS } from '../../src/domain/retention.ts';
import type { Queryable } from '../../src/store/db/db.ts';
import { failuresPage } from '../../src/store/operations/failure-sql.ts';
import {
  AGED_TABLES,
  deleteEventRange,
  deleteItemRange,
  endedExecutionsDue,
  finishedOperationsDue,
  firstPrunedFailure,
  padsOverVersionLimit,
  scanAfter,
} from '../../src/store/retention/retention-sql.ts';
import { type Harness, ids, startHarness } from '../helpers/harness.ts';
import { type PrivateDatabase, privatePostgresDatabase } from '../helpers/private-database.ts';

const VISITED = 20_000;
const ITEMS = 100_000;
const BATCH = 5000;
const HOUR_MS = 3_600_000;
/**
 * Per row handled: its index entry, its heap tuple and, for a delete by id, a descent of the
 * primary key (about 2 to 4 measured). Walking the table instead would cost 20 (items) to 50
 * (events) pages a row at these sizes, and grow with them.
 */
const PAGES_PER_ROW = 10;

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  'Shared Hit Blocks': number;
  'Shared Read Blocks': number;
  'Actual Rows': number;
  Plans?: PlanNode[];
}

interface Explained {
  /** Pages the statement touched (shared buffers hit or read). */
  pages: number;
  /** Each node, as "Index Scan on <table> using <index>". */
  nodes: string[];
}

function walk(node: PlanNode, visit: (node: PlanNode) => void): void {
  visit(node);
  for (const child of node.Plans ?? []) {
    walk(child, visit);
  }
}

describe('the cost of retention’s statements (postgres)', () => {
  let database: PrivateDatabase;
  let harness: Harness;
  let operationId: string;
  const measured: Record<string, string> = {};

  /** Runs `run` with every statement it sends EXPLAINed (and executed) in a rolled-back transaction. */
  async function explain(run: (q: Queryable) => Promise<unknown>): Promise<Explained> {
    const result: Explained = { pages: 0, nodes: [] };
    await harness.db
      .transaction(async (tx) => {
        const explaining: Queryable = {
          async query(text, params) {
            const rows = await tx.query<{ 'QUERY PLAN': [{ Plan: PlanNode }] }>(
              `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${text}`,
              params,
            );
            const plan = rows[0]?.['QUERY PLAN'][0].Plan as PlanNode;
            result.pages += plan['Shared Hit Blocks'] + plan['Shared Read Blocks'];
            walk(plan, (n) =>
              result.nodes.push(
                `${n['Node Type']}${n['Relation Name'] ? ` on ${n['Relation Name']}` : ''}${n['Index Name'] ? ` using ${n['Index Name']}` : ''}`,
              ),
            );
            return [];
          },
        };
        await run(explaining);
        throw new Error('rollback');
      })
      .catch((error: Error) => {
        if (error.message !== 'rollback') {
          throw error;
        }
      });
    return result;
  }

  beforeAll(async () => {
    database = await privatePostgresDatabase('retention_plans');
    harness = await startHarness('postgres', { databaseUrl: database.url });
    const tenant = await harness.newTenant();
    const conversation = randomUUID();
    const created = await tenant.op(conversation, {
      action: 'create',
      operation_type: 'bulk',
      total_items: ITEMS,
      item_ids: ids(ITEMS, 'item'),
    });
    expect(created.status).toBe(200);
    operationId = created.body.operation_id as string;
    const db = harness.db;
    const org = tenant.organizationId;
    // The operation, finished two hours ago with every item recorded (every other one of its
    // first half failed), and its batch events.
    await db.query(
      `UPDATE assistant_operation_item
       SET status = CASE WHEN ordinal < $2 AND ordinal % 2 = 1 THEN 'failed' ELSE 'completed' END,
           reason = CASE WHEN ordinal < $2 AND ordinal % 2 = 1 THEN 'no phone' END
       WHERE operation_id = $1`,
      [operationId, ITEMS / 2],
    );
    await db.query(
      `UPDATE assistant_operation SET status = 'completed', completed_count = total_items,
         updated_at = now() - interval '2 hours' WHERE id = $1`,
      [operationId],
    );
    // Its events interleaved with ten times as many of another operation's, as many operations'
    // batches are: a statement that walked the table would touch 50 pages a row or more.
    const [other] = await db.query<{ id: string }>(
      `INSERT INTO assistant_operation (conversation_id, organization_id, operation_type, status, total_items)
       VALUES ($1, $2, 'bulk', 'active', 0) RETURNING id`,
      [conversation, org],
    );
    await db.query(
      `INSERT INTO operation_event (operation_id, organization_id, kind, actor, data)
       SELECT CASE WHEN i % 11 = 0 THEN $1 ELSE $3::uuid END, $2, 'batch_recorded', 'worker', '{}'
       FROM generate_series(1, ${11 * VISITED}) AS i`,
      [operationId, org, other?.id],
    );
    // What retention already visited: pruned operations, ended executions whose traces are gone,
    // pads within their version limit; and context renders, all old.
    await db.query(
      `INSERT INTO assistant_operation (conversation_id, organization_id, operation_type, status, total_items,
         state_json, updated_at)
       SELECT $1, $2, 'bulk', 'completed', 1,
         jsonb_build_object('items_pruned_at', now(), 'events_pruned_at', now()), now() - interval '3 hours'
       FROM generate_series(1, ${VISITED})`,
      [conversation, org],
    );
    // The pruned operations' kept failures: a few each.
    await db.query(
      `INSERT INTO assistant_operation_kept_failure (operation_id, ordinal, item_id, attempts, reason)
       SELECT o.id, k, 'item-' || k, 1, 'no phone' FROM assistant_operation o, generate_series(0, 2) k
       WHERE o.state_json ? 'items_pruned_at'`,
    );
    await db.query(
      `INSERT INTO assistant_execution (conversation_id, organization_id, status, ended_at, traces_pruned_at)
       SELECT $1, $2, 'ended', now() - interval '3 hours', now() FROM generate_series(1, ${VISITED})`,
      [conversation, org],
    );
    await db.query(
      `WITH conversations AS (
         INSERT INTO assistant_conversation (id, organization_id)
         SELECT gen_random_uuid(), $1 FROM generate_series(1, ${VISITED}) RETURNING id)
       INSERT INTO scratchpad (conversation_id, organization_id, version, pad, versions_pruned_through)
       SELECT id, $1, 50, '{}', 48 FROM conversations`,
      [org],
    );
    await db.query(
      `INSERT INTO context_render (conversation_id, organization_id, pad_version, chars, sha256, created_at)
       SELECT $1, $2, 0, 0, '', now() - interval '3 hours' FROM generate_series(1, ${VISITED})`,
      [conversation, org],
    );
    await db.query('ANALYZE');
  }, 120_000);

  afterAll(async () => {
    process.stdout.write(`retention plans (pages): ${JSON.stringify(measured)}\n`);
    await harness?.close();
    await database?.drop();
  });

  it('finds what is due through partial indexes that hold only what is left to visit', async () => {
    const items = await explain((q) => finishedOperationsDue(q, 'items', HOUR_MS, 50));
    expect(items.nodes.join(' | ')).toMatch(
      /Index Scan on assistant_operation using idx_assistant_operation_items_unpruned/,
    );
    const events = await explain((q) => finishedOperationsDue(q, 'events', HOUR_MS, 50));
    expect(events.nodes.join(' | ')).toMatch(
      /Index Scan on assistant_operation using idx_assistant_operation_events_unpruned/,
    );
    const executions = await explain((q) => endedExecutionsDue(q, HOUR_MS, 50));
    expect(executions.nodes.join(' | ')).toMatch(/idx_assistant_execution_traces_unpruned/);
    const pads = await explain((q) => padsOverVersionLimit(q, 3, 50));
    expect(pads.nodes.join(' | ')).toMatch(/idx_scratchpad_unpruned_versions/);
    // 20,000 rows already visited in each table, and a handful of pages read.
    for (const [name, explained] of Object.entries({ items, events, executions, pads })) {
      measured[`due_${name}`] = String(explained.pages);
      expect(explained.pages, name).toBeLessThan(20);
    }
  });

  it('deletes a range of an operation’s items, and of its events, touching pages in proportion to the range', async () => {
    // The last 5,000 of 100,000 items: a range of the primary key, not a walk from the start.
    const items = await explain((q) => deleteItemRange(q, operationId, ITEMS - BATCH, ITEMS, null));
    expect(items.nodes.join(' | ')).not.toMatch(/Seq Scan/);
    // An index scan or a bitmap of the key range, as the planner likes: either reads the range only.
    expect(items.nodes.join(' | ')).toMatch(
      /Index Scan (on assistant_operation_item )?using pk_assistant_operation_item/,
    );
    measured.items_pages_per_row = (items.pages / BATCH).toFixed(2);
    expect(items.pages / BATCH).toBeLessThan(PAGES_PER_ROW);

    const events = await explain((q) => deleteEventRange(q, operationId, 0, BATCH, BULK_EVENT_KINDS));
    expect(events.nodes.join(' | ')).not.toMatch(/Seq Scan on operation_event/);
    expect(events.nodes.join(' | ')).toMatch(/Index Scan (on operation_event )?using idx_operation_event_operation/);
    measured.events_pages_per_row = (events.pages / BATCH).toFixed(2);
    expect(events.pages / BATCH).toBeLessThan(PAGES_PER_ROW);
  });

  it('reads an operation’s failures in order from both tables, touching pages in proportion to the rows read', async () => {
    // 25,000 failures: a page of 50 of them, and the first failure past 100 kept, each read as
    // two ordered index ranges merged (a UNION ALL view sorted all 25,000 instead).
    const reads = {
      failures_page: await explain((q) => failuresPage(q, operationId, 20_001, 50)),
      first_pruned_failure: await explain((q) => firstPrunedFailure(q, operationId, 100)),
    };
    for (const [name, read] of Object.entries(reads)) {
      const nodes = read.nodes.join(' | ');
      expect(nodes, name).toMatch(/Merge Append/);
      expect(nodes, name).toMatch(/Index Scan on assistant_operation_item using idx_assistant_operation_item_failure/);
      expect(nodes, name).toMatch(
        /Index (Only )?Scan on assistant_operation_kept_failure using pk_assistant_operation_kept_failure/,
      );
      expect(nodes, name).not.toMatch(/Sort|Seq Scan/);
      measured[`${name}_pages`] = String(read.pages);
      expect(read.pages, name).toBeLessThan(101 * PAGES_PER_ROW);
    }
  });

  it('scans an append-only table from its watermark, by primary key', async () => {
    const [first] = await harness.db.query<{ id: number }>('SELECT min(id)::int AS id FROM context_render');
    const from = (first?.id ?? 0) + VISITED - BATCH - 1;
    const scan = await explain((q) => scanAfter(q, AGED_TABLES.contextRenders, from, HOUR_MS, BATCH));
    expect(scan.nodes.join(' | ')).toMatch(/Index Scan on context_render using context_render_pkey/);
    measured.scan_pages_per_row = (scan.pages / BATCH).toFixed(2);
    expect(scan.pages / BATCH).toBeLessThan(PAGES_PER_ROW);
  });
});
