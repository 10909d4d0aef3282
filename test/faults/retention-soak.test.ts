/**
 * The retention soak: operations of 10,000 items created and finished without pause by two
 * `opspad worker` processes, with retention set to seconds (OPSPAD_RETENTION=2s, a reconciler
 * pass every 500 ms), while a paused and an active operation sit there for the whole run. It
 * checks, all along and at the end:
 * - no live operation loses a row: every active or paused operation's item rows equal its total,
 *   and its completed and failed rows its counters (one statement, one snapshot), at every check;
 * - what finished lost nothing that counts: each operation's counters add up to its total, every
 *   item's side effect happened, and it keeps its first OPSPAD_RETENTION_FAILURES failures;
 * - storage stays flat: the item table ends with the live rows alone (the kept failures in a
 *   table of their own, which grows by OPSPAD_RETENTION_FAILURES rows per operation), and the item
 *   and event tables' size on disk (pg_total_relation_size: heap and indexes) at the end is within
 *   a margin of their size halfway (after FIRST_HALF_MS), while twice the items went through.
 *   `max_backlog_ops` says how far retention fell behind: the most finished operations a check
 *   found not pruned yet.
 *
 * On disk, space freed by deletes is reused once VACUUM has passed; production runs autovacuum,
 * this machine's Postgres runs with autovacuum off, so the soak runs VACUUM on the two tables
 * as an eager autovacuum would (at every check, and twice before each size is read).
 *
 * Prints one line: `SOAK retention operations=… items=… live_audits=… rows_end=… items_halfway=…
 * item_mb=<halfway>->… item_heap_mb=… event_mb=… kept_failures_mb=… max_backlog_ops=… seconds=…`.
 */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, afterEach, describe, expect, inject, it } from 'vitest';
import { closeCountingClient, countingHandler } from '../fixtures/counting-handler.ts';
import { type Harness, harnessPrefix, ids, startHarness, type Tenant } from '../helpers/harness.ts';
import { type PrivateDatabase, privatePostgresDatabase } from '../helpers/private-database.ts';
import { killAllChildren, startWorker } from '../helpers/processes.ts';
import { testKey } from '../helpers/redis.ts';
import { eventually } from '../helpers/wait.ts';

/**
 * The load's first half, by time: then the sizes are taken, and the second half runs until as many
 * items again have gone through (however fast this machine is at the moment), within
 * MAX_LOAD_MS. The whole scenario stays within about two minutes.
 */
const FIRST_HALF_MS = 35_000;
const MAX_LOAD_MS = 120_000;
const ITEMS = 10_000;
/** Operations running at once. */
const IN_FLIGHT = 3;
/** One item in a hundred fails for good (the counting handler fails ids starting with `fail-`). */
const FAIL_EVERY = 100;
const FAILURES_KEPT = 20;
const RETENTION = {
  OPSPAD_RETENTION: '2s',
  OPSPAD_RETENTION_FAILURES: String(FAILURES_KEPT),
};
/**
 * Size at the end against the size halfway: the same rows live, space reused. Without retention
 * the item table would roughly double over the second half.
 */
const SIZE_MARGIN = 1.5;
/**
 * Bytes of the event table's growth allowed per event written in the second half: a third of what
 * a batch event takes when its space is never reused (about 300 bytes: its row, 230, and its
 * entries in the primary key and the (operation, id) index).
 */
const EVENT_BYTES_KEPT_AT_MOST = 100;

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  await killAllChildren();
  for (const cleanup of cleanups.splice(0).reverse()) {
    await cleanup().catch(() => undefined);
  }
});
afterAll(() => closeCountingClient());

interface LiveAudit {
  id: string;
  status: string;
  total_items: number;
  completed_count: number;
  failed_count: number;
  rows: number;
  completed_rows: number;
  failed_rows: number;
}

function itemIdsWithFailures(count: number): string[] {
  return ids(count, 'item').map((id, i) => (i % FAIL_EVERY === FAIL_EVERY - 1 ? `fail-${i}` : id));
}

describe('retention soak (postgres, two worker processes)', () => {
  let database: PrivateDatabase;
  let harness: Harness;
  let tenant: Tenant;
  let sidefx: Redis;

  const query = <R extends object>(sql: string, params: unknown[] = []) => harness.db.query<R>(sql, params);

  /** Every active and paused operation, its rows counted in the same snapshot as its counters. */
  async function auditLive(): Promise<LiveAudit[]> {
    const live = await query<LiveAudit>(
      `SELECT o.id, o.status, o.total_items, o.completed_count, o.failed_count,
         (SELECT count(*)::int FROM assistant_operation_item i WHERE i.operation_id = o.id) AS rows,
         (SELECT count(*)::int FROM assistant_operation_item i WHERE i.operation_id = o.id AND i.status = 'completed') AS completed_rows,
         (SELECT count(*)::int FROM assistant_operation_item i WHERE i.operation_id = o.id AND i.status = 'failed') AS failed_rows
       FROM assistant_operation o WHERE o.status IN ('active', 'paused')`,
    );
    for (const op of live) {
      expect(op, `live operation ${op.id} (${op.status})`).toMatchObject({
        rows: op.total_items,
        completed_rows: op.completed_count,
        failed_rows: op.failed_count,
      });
    }
    return live;
  }

  /** Bytes on disk; `eventsWritten`: events inserted so far (their ids' sequence). */
  interface Sizes {
    item: number;
    itemHeap: number;
    event: number;
    kept: number;
    eventsWritten: number;
  }

  /** VACUUM, as autovacuum would run it: it makes the space of deleted rows reusable. */
  const vacuum = () => query('VACUUM assistant_operation_item, operation_event');

  /**
   * Item and event tables on disk (files never shrink: this is their high-water mark). Two
   * VACUUMs first: an index page emptied by one is free for reuse after the next.
   */
  async function sizes(): Promise<Sizes> {
    await vacuum();
    await vacuum();
    const [row] = await query<Sizes>(
      `SELECT pg_total_relation_size('assistant_operation_item')::float8 AS item,
              pg_relation_size('assistant_operation_item')::float8 AS "itemHeap",
              pg_total_relation_size('operation_event')::float8 AS event,
              pg_total_relation_size('assistant_operation_kept_failure')::float8 AS kept,
              (SELECT last_value FROM operation_event_id_seq)::float8 AS "eventsWritten"`,
    );
    return row as Sizes;
  }

  it('keeps the item and event tables flat while operations are created and finished, and no live operation loses a row', async () => {
    const started = Date.now();
    database = await privatePostgresDatabase('soak');
    cleanups.push(() => database.drop());
    const prefix = harnessPrefix();
    // The API in this process, without workers: retention runs in the worker processes'
    // reconcilers, under their lock, as in a deployment.
    harness = await startHarness('postgres', {
      databaseUrl: database.url,
      handlers: [countingHandler],
      env: { OPSPAD_QUEUE_PREFIX: prefix },
    });
    cleanups.push(() => harness.close());
    tenant = await harness.newTenant();
    sidefx = new Redis(inject('redisUrl'));
    cleanups.push(async () => sidefx.disconnect());
    for (const name of ['soak-1', 'soak-2']) {
      await startWorker(name, prefix, { DATABASE_URL: database.url, ...RETENTION });
    }

    // Live all along: an assistant's operation with a batch leased, and a paused background one.
    const assistantConversation = randomUUID();
    const assistant = await tenant.op(assistantConversation, {
      action: 'create',
      operation_type: 'manual',
      total_items: 2000,
      item_ids: ids(2000, 'manual'),
      batch_size: 100,
    });
    const assistantId = assistant.body.operation_id as string;
    const first = await tenant.op(assistantConversation, { action: 'progress' });
    await tenant.op(assistantConversation, {
      action: 'update',
      operation_id: assistantId,
      completed_ids: (first.body.batch as string[]).slice(0, 60),
      failed: [{ id: 'manual-61', reason: 'no phone' }],
    });
    await tenant.op(assistantConversation, { action: 'progress' });
    const pausedConversation = randomUUID();
    const paused = await tenant.op(pausedConversation, {
      action: 'create',
      operation_type: 'counting',
      total_items: 5000,
      item_ids: itemIdsWithFailures(5000),
      batch_size: 50,
      query_params: { sidefx_key: testKey('soak-paused'), latency_ms: 2 },
    });
    const pausedId = paused.body.operation_id as string;
    await eventually(
      async () => ((await auditLive()).find((o) => o.id === pausedId && o.completed_count >= 200) ? true : undefined),
      { timeoutMs: 60_000, intervalMs: 100, what: 'the operation to be paused to start' },
    );
    expect((await tenant.op(pausedConversation, { action: 'pause', operation_id: pausedId })).status).toBe(200);

    // The load: IN_FLIGHT operations at a time, each followed to its end, for FIRST_HALF_MS and
    // then until twice the items of the first half have gone through.
    const loadStarted = Date.now();
    const finished: { id: string; sidefxKey: string }[] = [];
    let audits = 0;
    let checkpoint: Awaited<ReturnType<typeof sizes>> | undefined;
    let checkpointItems = 0;
    /** The most finished operations found waiting for retention at a check. */
    let maxBacklog = 0;
    const loading = () =>
      Date.now() - loadStarted < MAX_LOAD_MS &&
      (checkpoint === undefined || finished.length * ITEMS < 2 * checkpointItems);
    const runOne = async () => {
      const sidefxKey = testKey('soak');
      const created = await tenant.op(randomUUID(), {
        action: 'create',
        operation_type: 'counting',
        total_items: ITEMS,
        item_ids: itemIdsWithFailures(ITEMS),
        batch_size: 500,
        max_parallel_batches: 4,
        query_params: { sidefx_key: sidefxKey, latency_ms: 0 },
      });
      expect(created.status, JSON.stringify(created.body)).toBe(200);
      const id = created.body.operation_id as string;
      await eventually(
        async () => {
          const [row] = await query<{ status: string }>('SELECT status FROM assistant_operation WHERE id = $1', [id]);
          return row?.status === 'completed' ? true : undefined;
        },
        { timeoutMs: 120_000, intervalMs: 100, what: `operation ${id} to complete` },
      );
      finished.push({ id, sidefxKey });
    };
    const lanes = Array.from({ length: IN_FLIGHT }, async () => {
      while (loading()) {
        await runOne();
      }
    });
    const watcher = (async () => {
      while (loading()) {
        await auditLive();
        audits++;
        const [backlog] = await query<{ n: number }>(
          `SELECT count(*)::int AS n FROM assistant_operation
           WHERE status = 'completed' AND NOT (state_json ? 'items_pruned_at')`,
        );
        maxBacklog = Math.max(maxBacklog, backlog?.n ?? 0);
        if (!checkpoint && Date.now() - loadStarted > FIRST_HALF_MS) {
          checkpointItems = finished.length * ITEMS;
          checkpoint = await sizes();
        } else {
          await vacuum();
        }
        await new Promise((resolve) => setTimeout(resolve, 250)); // the cadence of the checks
      }
    })();
    await Promise.all([...lanes, watcher]);
    const live = await auditLive();
    expect(live.map((o) => o.id).sort()).toEqual([assistantId, pausedId].sort());

    // Everything finished has been pruned: the item table holds the live rows alone, and the
    // kept failures have moved to their own table.
    const expectedRows = 2000 + 5000;
    const expectedKept = finished.length * FAILURES_KEPT;
    const rowsEnd = await eventually(
      async () => {
        const [row] = await query<{ n: number; kept: number }>(
          `SELECT (SELECT count(*)::int FROM assistant_operation_item) AS n,
                  (SELECT count(*)::int FROM assistant_operation_kept_failure) AS kept`,
        );
        return row?.n === expectedRows && row.kept === expectedKept ? row.n : undefined;
      },
      {
        timeoutMs: 30_000,
        intervalMs: 200,
        what: `retention to catch up (${expectedRows} item rows, ${expectedKept} kept failures)`,
      },
    );
    // And their batch events (the next stage of the same runs).
    await eventually(
      async () => {
        const [events] = await query<{ bulk: number }>(
          `SELECT count(*)::int AS bulk FROM operation_event e JOIN assistant_operation o ON o.id = e.operation_id
           WHERE o.status = 'completed' AND e.kind IN ('batch_leased', 'batch_recorded', 'lease_expired')`,
        );
        return events?.bulk === 0 ? true : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 200, what: 'the batch events of finished operations to be pruned' },
    );

    // What finished: exact counters, every side effect, the first failures kept and the rest counted.
    const failures = ITEMS / FAIL_EVERY;
    for (const { id, sidefxKey } of finished) {
      const [op] = await query<{ completed_count: number; failed_count: number; kept: number }>(
        `SELECT completed_count, failed_count,
           (SELECT count(*)::int FROM assistant_operation_kept_failure WHERE operation_id = $1) AS kept
         FROM assistant_operation WHERE id = $1`,
        [id],
      );
      expect(op).toEqual({ completed_count: ITEMS - failures, failed_count: failures, kept: FAILURES_KEPT });
      expect(await sidefx.hlen(sidefxKey)).toBe(ITEMS - failures);
      await sidefx.del(sidefxKey);
    }
    const sample = finished[0]?.id as string;
    const [sampleConversation] = await query<{ conversation_id: string }>(
      'SELECT conversation_id FROM assistant_operation WHERE id = $1',
      [sample],
    );
    const got = await tenant.op(sampleConversation?.conversation_id as string, { action: 'get', operation_id: sample });
    expect(got.body).toMatchObject({
      completed_count: ITEMS - failures,
      failed_count: failures,
      items_pruned: { failures_kept: FAILURES_KEPT, failures_pruned: failures - FAILURES_KEPT },
    });

    // Flat on disk: three times the items through, about the same size.
    const end = await sizes();
    const items = finished.length * ITEMS;
    const mid = checkpoint as NonNullable<typeof checkpoint>;
    expect(mid, 'the sizes halfway through').toBeDefined();
    expect(items, `twice the first half's items through within ${MAX_LOAD_MS} ms`).toBeGreaterThanOrEqual(
      2 * checkpointItems,
    );
    // The rows' own pages are reused: the heap stays flat, and so do the indexes (a pruned
    // operation leaves no entry in them: its kept failures are in a table of their own).
    expect(end.itemHeap).toBeLessThanOrEqual(mid.itemHeap * SIZE_MARGIN);
    expect(end.item).toBeLessThanOrEqual(mid.item * SIZE_MARGIN);
    // The event table is a few hundred kilobytes, and how far it grows between VACUUMs follows
    // the worst backlog of the run, which a longer second half samples more often: so its bound
    // is the events the second half wrote. Each takes about 300 bytes on disk (its row and two
    // index entries) when no space is reused; at most a third of that may stay.
    const eventsSecondHalf = end.eventsWritten - mid.eventsWritten;
    expect(end.event).toBeLessThanOrEqual(
      Math.max(mid.event * SIZE_MARGIN, mid.event + eventsSecondHalf * EVENT_BYTES_KEPT_AT_MOST),
    );
    const mb = (bytes: number) => (bytes / 1024 / 1024).toFixed(1);
    process.stdout.write(
      `SOAK retention operations=${finished.length} items=${items} live_audits=${audits} rows_end=${rowsEnd} items_halfway=${checkpointItems} item_mb=${mb(mid.item)}->${mb(end.item)} item_heap_mb=${mb(mid.itemHeap)}->${mb(end.itemHeap)} event_mb=${mb(mid.event)}->${mb(end.event)} events_second_half=${eventsSecondHalf} kept_failures_mb=${mb(mid.kept)}->${mb(end.kept)} max_backlog_ops=${maxBacklog} seconds=${((Date.now() - started) / 1000).toFixed(1)}\n`,
    );
  });
});
