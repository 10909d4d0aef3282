import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  cancelOperation,
  getOperation,
  leaseBatch,
  type OpspadDatabase,
  reclaimExpiredLeases,
  recordResults,
  releaseLeasedItems,
} from '../../src/store/index.ts';
import { ENGINES, ids, newStoreOperation, openTestDatabase } from '../helpers/harness.ts';

describe.each(ENGINES)('lease bookkeeping on %s', (engine) => {
  let db: OpspadDatabase;

  beforeAll(async () => {
    db = await openTestDatabase(engine);
  });
  afterAll(async () => {
    await db.close();
  });

  const newOperation = (items: number, batchSize: number) => newStoreOperation(db, items, batchSize);

  /** The in-flight count the API answers, the item rows leased, and the lease rows left. */
  async function books(scope: { organizationId: string; conversationId: string }, operationId: string) {
    const { counts } = await getOperation(db, scope, operationId, { after: -1, limit: 1 });
    const [leased] = await db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM assistant_operation_item WHERE operation_id = $1 AND status = 'leased'`,
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
    await db.query(
      `UPDATE assistant_operation_item SET lease_expires_at = now() - interval '1 second'
       WHERE operation_id = $1 AND lease_owner = 'crashed' AND status = 'leased'`,
      [operationId],
    );
    await db.query(
      `UPDATE assistant_operation_lease SET expires_at = now() - interval '1 second'
       WHERE operation_id = $1 AND owner = 'crashed'`,
      [operationId],
    );
    await reclaimExpiredLeases(db, scope, operationId, 'test');
    const reclaimed = await books(scope, operationId);
    expect(reclaimed).toMatchObject({ inFlight: 3, leasedRows: 3 });
    expect(reclaimed.leases.map((l) => l.owner)).toEqual(['alive']);
    const rescuer = await leaseBatch(db, scope, { operationId, owner: 'rescuer', leaseSeconds: 300 });
    expect(rescuer.batch).toEqual(crashed.batch);

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
    expect(table?.options).toContain('fillfactor=25');
  });
});
