import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  cancelOperation,
  extendLeases,
  getOperation,
  leaseBatch,
  type OpspadDatabase,
  reclaimExpiredLeases,
  recordResults,
  releaseLeasedItems,
} from '../../src/store/index.ts';
import { LEASE_NEXT_SQL } from '../../src/store/leases/item-sql.ts';
import { ENGINES, ids, newStoreOperation, openTestDatabase } from '../helpers/harness.ts';
import { expireLeases, ITEM_STATES } from '../helpers/item-states.ts';
import { eventually } from '../helpers/wait.ts';

describe.each(ENGINES)('lease bookkeeping on %s', (engine) => {
  let db: OpspadDatabase;

  beforeAll(async () => {
    db = await openTestDatabase(engine);
  });
  afterAll(async () => {
    await db.close();
  });

  const newOperation = (items: number, batchSize: number) => newStoreOperation(db, items, batchSize);

  /** The in-flight count the API answers, the items leased, and the lease rows left. */
  async function books(scope: { organizationId: string; conversationId: string }, operationId: string) {
    const { counts } = await getOperation(db, scope, operationId, { after: -1, limit: 1 });
    const [leased] = await db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM (${ITEM_STATES}) i WHERE operation_id = $1 AND status = 'leased'`,
      [operationId],
    );
    const leases = await db.query<{ owner: string; remaining: number }>(
      'SELECT owner, remaining FROM assistant_operation_lease WHERE operation_id = $1 ORDER BY owner',
      [operationId],
    );
    return { inFlight: counts.in_flight_count, leasedRows: leased?.n ?? 0, leases };
  }

  it('keeps the in-flight count equal to the leased rows through partial records and releases', async () => {
    const { scope, operationId } = await newOperation(20, 4);
    const a = await leaseBatch(db, scope, { operationId, owner: 'a', leaseSeconds: 300 });
    const b = await leaseBatch(db, scope, { operationId, owner: 'b', leaseSeconds: 300 });
    expect(a.batch).toEqual(ids(20).slice(0, 4));
    expect(b.counts.in_flight_count).toBe(8);
    expect(await books(scope, operationId)).toMatchObject({ inFlight: 8, leasedRows: 8 });

    // a records half of its batch; b records one of a's items too (it is a's, live: a conflict).
    await recordResults(db, scope, { operationId, completedIds: a.batch.slice(0, 2), failed: [], owner: 'a' });
    const conflict = await recordResults(db, scope, {
      operationId,
      completedIds: [a.batch[2] as string],
      failed: [],
      owner: 'b',
    });
    expect(conflict.leaseConflicts).toEqual([a.batch[2]]);
    expect(await books(scope, operationId)).toMatchObject({ inFlight: 6, leasedRows: 6 });

    // Asking again returns a's remaining items, not a new batch.
    const again = await leaseBatch(db, scope, { operationId, owner: 'a', leaseSeconds: 300 });
    expect(again.batch).toEqual(a.batch.slice(2));

    // b gives two items back, then fails the other two: its lease row goes with its batch.
    expect(await releaseLeasedItems(db, scope, operationId, 'b', b.batch.slice(0, 2))).toBe(2);
    expect(await books(scope, operationId)).toMatchObject({ inFlight: 4, leasedRows: 4 });
    await recordResults(db, scope, {
      operationId,
      completedIds: [],
      failed: b.batch.slice(2).map((id) => ({ id, reason: 'unreachable' })),
      owner: 'b',
    });
    const afterB = await books(scope, operationId);
    expect(afterB).toMatchObject({ inFlight: 2, leasedRows: 2 });
    expect(afterB.leases).toEqual([{ owner: 'a', remaining: 2 }]);

    // The failures are found through their index and listed in order.
    const { failures } = await getOperation(db, scope, operationId, { after: -1, limit: 10 });
    expect(failures.map((f) => f.item_id)).toEqual(b.batch.slice(2));
  });

  it('returns an expired lease to pending and drops its row; a cancel leaves no lease', async () => {
    const { scope, operationId } = await newOperation(10, 3);
    const crashed = await leaseBatch(db, scope, { operationId, owner: 'crashed', leaseSeconds: 300 });
    await leaseBatch(db, scope, { operationId, owner: 'alive', leaseSeconds: 300 });
    await expireLeases(db, operationId, 'crashed');
    // A heartbeat extends a live lease, never an expired one: a record may be taking its items.
    expect(await extendLeases(db, scope, operationId, 'alive', 300)).toBe(3);
    expect(await extendLeases(db, scope, operationId, 'crashed', 300)).toBe(0);
    await reclaimExpiredLeases(db, scope, operationId, 'test');
    const reclaimed = await books(scope, operationId);
    expect(reclaimed).toMatchObject({ inFlight: 3, leasedRows: 3 });
    expect(reclaimed.leases.map((l) => l.owner)).toEqual(['alive']);
    const rescuer = await leaseBatch(db, scope, { operationId, owner: 'rescuer', leaseSeconds: 300 });
    expect(rescuer.batch).toEqual(crashed.batch);
    // The crashed lease ended: counted in its items' attempts; the rescuer's is not counted yet.
    const attempts = await db.query<{ attempts: number }>(
      'SELECT attempts FROM assistant_operation_item WHERE operation_id = $1 AND item_id = ANY($2) ORDER BY ordinal',
      [operationId, crashed.batch],
    );
    expect(attempts.map((row) => row.attempts)).toEqual([1, 1, 1]);

    await cancelOperation(db, scope, operationId, { actor: 'test' });
    expect(await books(scope, operationId)).toEqual({ inFlight: 0, leasedRows: 0, leases: [] });
  });

  it('leaves no lease row behind an operation done batch by batch', async () => {
    const { scope, operationId } = await newOperation(12, 5);
    for (let i = 0; i < 5; i++) {
      const owner = `job-${i}`;
      const lease = await leaseBatch(db, scope, { operationId, owner, leaseSeconds: 300 });
      if (lease.batch.length === 0) {
        break;
      }
      await recordResults(db, scope, { operationId, completedIds: lease.batch, failed: [], owner });
    }
    expect(await books(scope, operationId)).toEqual({ inFlight: 0, leasedRows: 0, leases: [] });
  });

  it('indexes no column the lease and record paths change, and keeps room in each page', async () => {
    const indexes = await db.query<{ name: string; definition: string }>(
      `SELECT indexrelid::regclass::text AS name, pg_get_indexdef(indexrelid) AS definition
       FROM pg_index WHERE indrelid = 'assistant_operation_item'::regclass`,
    );
    expect(indexes.length).toBeGreaterThanOrEqual(3);
    for (const index of indexes) {
      expect(index.definition, index.name).not.toMatch(/status|lease_owner|lease_expires_at|attempts|updated_at/);
    }
    const [table] = await db.query<{ options: string[] | null }>(
      `SELECT reloptions AS options FROM pg_class WHERE oid = 'assistant_operation_item'::regclass`,
    );
    expect(table?.options).toContain('fillfactor=45');
  });

  it('leaves the item rows alone on a lease and writes each once when it is recorded', async () => {
    const { scope, operationId } = await newOperation(6, 3);
    const versions = () =>
      db.query<{ item_id: string; version: string; attempts: number; status: string }>(
        `SELECT item_id, xmin::text AS version, attempts, status FROM assistant_operation_item
         WHERE operation_id = $1 ORDER BY ordinal`,
        [operationId],
      );
    const created = await versions();
    const lease = await leaseBatch(db, scope, { operationId, owner: 'w', leaseSeconds: 300 });
    expect(lease.batch).toEqual(ids(6).slice(0, 3));
    expect(await versions()).toEqual(created);

    await recordResults(db, scope, { operationId, completedIds: lease.batch, failed: [], owner: 'w' });
    const recorded = await versions();
    for (const [i, row] of recorded.entries()) {
      const before = created[i];
      if (i < 3) {
        expect(row).toMatchObject({ status: 'completed', attempts: 1 });
        expect(row.version).not.toBe(before?.version);
      } else {
        expect(row).toEqual(before);
      }
    }
  });
});

// Leases taken side by side from one cursor: each lane's scan may find rows another lane leased
// after the scan's snapshot was taken (their locks gone at its commit, the rows still pending).
// The second look of opspad_lease_items (drizzle/0013_item_written_once.sql) must leave them out.
describe('lanes leasing side by side on postgres', () => {
  let db: OpspadDatabase;

  beforeAll(async () => {
    db = await openTestDatabase('postgres');
  });
  afterAll(async () => {
    await db.close();
  });

  it('never leases an item to two lanes at once, and records each item once', async () => {
    const total = 3_000;
    const { scope, operationId } = await newStoreOperation(db, total, 7);
    const taken: string[] = [];
    let conflicts = 0;
    const lane = async (owner: string) => {
      // Bounded: every round leases at least one item or ends the lane.
      for (let round = 0; round < total; round++) {
        const { batch } = await leaseBatch(db, scope, { operationId, owner, leaseSeconds: 300 });
        if (batch.length === 0) {
          return;
        }
        taken.push(...batch);
        const result = await recordResults(db, scope, { operationId, completedIds: batch, failed: [], owner });
        conflicts += result.leaseConflicts.length;
      }
    };
    await Promise.all(Array.from({ length: 8 }, (_, i) => lane(`lane-${i}`)));

    expect(conflicts).toBe(0);
    expect(taken).toHaveLength(total);
    expect(new Set(taken).size).toBe(total);
    const rows = await db.query<{ status: string; attempts: number; n: number }>(
      `SELECT status, attempts, count(*)::int AS n FROM assistant_operation_item WHERE operation_id = $1
       GROUP BY status, attempts`,
      [operationId],
    );
    expect(rows).toEqual([{ status: 'completed', attempts: 1, n: total }]);
    expect(await db.query('SELECT 1 FROM assistant_operation_lease WHERE operation_id = $1', [operationId])).toEqual(
      [],
    );
  });

  it('leaves to a lease taken beside it the items a report names', async () => {
    // A circuit breaker sends every record through the general path (no one-call record).
    const { scope, operationId } = await newStoreOperation(db, 3, 3, { maxFailureRate: 0.5 });
    let report: ReturnType<typeof recordResults> | undefined;
    await db.transaction(async (tx) => {
      const leased = await tx.query<{ item_id: string }>(LEASE_NEXT_SQL, [operationId, 'v', 300, 0, 3, true]);
      expect(leased.map((row) => row.item_id)).toEqual(ids(3));
      // Another reporter names one of them while the lease is being taken: it waits for the
      // lease's locks, then must see the lease.
      report = recordResults(db, scope, {
        operationId,
        completedIds: [ids(3)[0] as string],
        failed: [],
        owner: 'late',
      });
      await eventually(
        async () => {
          const [waiting] = await db.query<{ n: number }>(
            `SELECT count(*)::int AS n FROM pg_stat_activity
             WHERE datname = current_database() AND wait_event_type = 'Lock'`,
          );
          return (waiting?.n ?? 0) > 0 ? true : undefined;
        },
        { what: 'the record to wait for the lease' },
      );
    });
    const result = await (report as ReturnType<typeof recordResults>);
    expect(result.leaseConflicts).toEqual([ids(3)[0]]);
    const states = await db.query<{ status: string; lease_owner: string | null }>(
      `SELECT status, lease_owner FROM (${ITEM_STATES}) i WHERE operation_id = $1 ORDER BY ordinal`,
      [operationId],
    );
    expect(states).toEqual(ids(3).map(() => ({ status: 'leased', lease_owner: 'v' })));
  });
});
