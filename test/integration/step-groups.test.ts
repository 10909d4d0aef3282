/**
 * Lanes of one operation recording in one process go together (src/store/leases/step-groups.ts,
 * opspad_record_lease_steps): the lanes that record while a call is in flight share the next
 * call — one statement, one transaction — and each gets the answer it would have got alone: its
 * record counted, its own next batch, its events. A group one of whose lanes may not record
 * (a late worker) or whose call fails changes nothing and its lanes go alone; failures keep their reasons; a paused
 * operation's lanes record and lease nothing; the last lanes hear that nothing is left to lease.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type Database,
  leaseBatch,
  type OpspadDatabase,
  pauseOperation,
  type RecordResult,
  recordResults,
} from '../../src/store/index.ts';
import { counting, ENGINES, ids, newStoreOperation, openTestDatabase } from '../helpers/harness.ts';
import { ITEM_STATES } from '../helpers/item-states.ts';

const LEASE = { leaseSeconds: 300 };

describe.each(ENGINES)('lanes recording together on %s', (engine) => {
  let db: OpspadDatabase;

  beforeAll(async () => {
    db = await openTestDatabase(engine);
  });
  afterAll(async () => {
    await db.close();
  });

  /**
   * An operation whose lanes `owners` each hold a batch; `record` reports a lane's batch (the
   * `failed` ones failed, the rest completed) and asks for its next, as a worker going on does.
   */
  const withLanes = async (items: number, batchSize: number, owners: readonly string[]) => {
    const { scope, operationId } = await newStoreOperation(db, items, batchSize);
    const batches = new Map<string, string[]>();
    for (const owner of owners) {
      batches.set(owner, (await leaseBatch(db, scope, { operationId, owner, ...LEASE })).batch);
    }
    const record = (
      owner: string,
      {
        failed = [],
        batchSize: next,
        via = db,
        whole = false,
      }: { failed?: { id: string; reason: string }[]; batchSize?: number; via?: Database; whole?: boolean } = {},
    ) =>
      recordResults(via, scope, {
        operationId,
        completedIds: (batches.get(owner) as string[]).filter((id) => !failed.some((f) => f.id === id)),
        failed,
        owner,
        leaseNext: { ...LEASE, ...(next === undefined ? {} : { batchSize: next }) },
        ...(whole ? { wholeLease: { firstId: (batches.get(owner) as string[])[0] as string } } : {}),
      });
    return { scope, operationId, batches, record };
  };

  /** The transaction (xmin) each lane's batch_recorded event was written in. */
  const recordTransactions = async (operationId: string) => {
    const rows = await db.query<{ actor: string; tx: string }>(
      `SELECT actor, xmin::text AS tx FROM operation_event WHERE operation_id = $1 AND kind = 'batch_recorded'`,
      [operationId],
    );
    return new Map(rows.map((row) => [row.actor, row.tx]));
  };

  const operationRow = async (operationId: string) =>
    (
      await db.query<{ completed_count: number; failed_count: number; cursor: number; status: string }>(
        `SELECT completed_count, failed_count, (state_json->>'cursor')::int AS cursor, status
         FROM assistant_operation WHERE id = $1`,
        [operationId],
      )
    )[0];

  it('sends the lanes that record during a call in the next call, each answered as if alone', async () => {
    const owners = ['a', 'b', 'c', 'd'];
    const { operationId, record } = await withLanes(40, 4, owners);
    const { db: counted, statements } = counting(db);

    const results = await Promise.all(owners.map((owner) => record(owner, { via: counted })));

    // a went alone; b, c and d waited for it and went in one call.
    expect(statements()).toBe(2);
    const tx = await recordTransactions(operationId);
    expect(tx.get('b')).toBe(tx.get('c'));
    expect(tx.get('c')).toBe(tx.get('d'));
    expect(tx.get('a')).not.toBe(tx.get('b'));
    expect(results[0]?.counts).toMatchObject({ completed_count: 4, in_flight_count: 16 });
    for (const result of results.slice(1)) {
      expect(result.counts).toMatchObject({ completed_count: 16, in_flight_count: 16, remaining_count: 24 });
    }
    // Each lane its own next batch: together the next 16 items, none twice.
    const next = results.map((result) => (result.next?.kind === 'leased' ? result.next.batch : []));
    for (const batch of next) {
      expect(batch).toHaveLength(4);
    }
    expect(next.flat().sort()).toEqual(ids(40).slice(16, 32).sort());
    const leases = await db.query<{ owner: string; remaining: number }>(
      'SELECT owner, remaining FROM assistant_operation_lease WHERE operation_id = $1 ORDER BY owner',
      [operationId],
    );
    expect(leases).toEqual(owners.map((owner) => ({ owner, remaining: 4 })));
    expect(await operationRow(operationId)).toMatchObject({ completed_count: 16, cursor: 32 });
    const leasedEvents = await db.query<{ actor: string; count: number }>(
      `SELECT actor, (data->>'count')::int AS count FROM operation_event
       WHERE operation_id = $1 AND kind = 'batch_leased' ORDER BY id`,
      [operationId],
    );
    expect(leasedEvents.slice(4)).toHaveLength(4); // one per lane's next batch
  });

  it('records lanes that name their whole leases in one call, and refuses the same names again', async () => {
    const owners = ['a', 'b', 'c', 'd'];
    const { operationId, record } = await withLanes(40, 4, owners);
    const { db: counted, statements } = counting(db);

    const results = await Promise.all(owners.map((owner) => record(owner, { via: counted, whole: true })));
    expect(statements()).toBe(2); // a alone, then b, c and d together
    const tx = await recordTransactions(operationId);
    expect(new Set(['b', 'c', 'd'].map((owner) => tx.get(owner))).size).toBe(1);
    const next = results.map((result) => (result.next?.kind === 'leased' ? result.next.batch : []));
    expect(next.flat().sort()).toEqual(ids(40).slice(16, 32).sort());
    expect(await operationRow(operationId)).toMatchObject({ completed_count: 16, cursor: 32 });

    // The same names again (each lane now holds its next batch, of the same size): every lane
    // is refused by the grouped call and alone, and the general path finds its ids recorded.
    const again = await Promise.all(owners.map((owner) => record(owner, { whole: true })));
    for (const result of again) {
      expect(result.alreadyRecorded).toHaveLength(4);
      expect(result.next).toBeUndefined();
    }
    expect(await operationRow(operationId)).toMatchObject({ completed_count: 16, cursor: 32 });
    const leases = await db.query<{ owner: string; remaining: number }>(
      'SELECT owner, remaining FROM assistant_operation_lease WHERE operation_id = $1 ORDER BY owner',
      [operationId],
    );
    expect(leases).toEqual(owners.map((owner) => ({ owner, remaining: 4 })));
  });

  it('lets each lane go alone when one of the group may not record, the others counted once', async () => {
    const { scope, operationId, batches, record } = await withLanes(30, 5, ['a', 'b', 'c']);
    // b's lease ran out and b2 took its items over: b is a late worker.
    await db.query(
      `UPDATE assistant_operation_lease SET expires_at = now() - interval '1 second' WHERE operation_id = $1 AND owner = 'b'`,
      [operationId],
    );
    const taken = await leaseBatch(db, scope, { operationId, owner: 'b2', ...LEASE });
    expect(taken.batch.sort()).toEqual((batches.get('b') as string[]).slice().sort());

    const [a, b, c] = (await Promise.all([record('a'), record('b'), record('c')])) as RecordResult[];

    expect(b?.leaseConflicts.sort()).toEqual((batches.get('b') as string[]).slice().sort());
    expect(a?.next?.kind).toBe('leased');
    expect(c?.next?.kind).toBe('leased');
    expect(await operationRow(operationId)).toMatchObject({ completed_count: 10, failed_count: 0 });
    const bItems = await db.query<{ status: string; lease_owner: string | null }>(
      `SELECT status, lease_owner FROM (${ITEM_STATES}) i WHERE operation_id = $1 AND item_id = ANY($2)`,
      [operationId, batches.get('b')],
    );
    expect(bItems.every((row) => row.status === 'leased' && row.lease_owner === 'b2')).toBe(true);
    // b and c did not share a call (it rolled back): each event in its own transaction.
    const tx = await recordTransactions(operationId);
    expect(tx.has('b')).toBe(false);
    expect(new Set([tx.get('a'), tx.get('c')]).size).toBe(2);
  });

  it('keeps the reasons of a lane that failed items, beside lanes that completed theirs', async () => {
    const { scope, operationId, batches } = await withLanes(30, 3, ['a', 'b', 'c']);
    const [bFirst, ...bRest] = batches.get('b') as string[];
    await Promise.all([
      recordResults(db, scope, { operationId, completedIds: batches.get('a') as string[], failed: [], owner: 'a' }),
      recordResults(db, scope, {
        operationId,
        completedIds: bRest,
        failed: [{ id: bFirst as string, reason: 'carrier refused' }],
        owner: 'b',
        leaseNext: LEASE,
      }),
      recordResults(db, scope, {
        operationId,
        completedIds: batches.get('c') as string[],
        failed: [],
        owner: 'c',
        leaseNext: LEASE,
      }),
    ]);
    expect(await operationRow(operationId)).toMatchObject({ completed_count: 8, failed_count: 1 });
    const failed = await db.query<{ item_id: string; reason: string }>(
      `SELECT item_id, reason FROM assistant_operation_item WHERE operation_id = $1 AND status = 'failed'`,
      [operationId],
    );
    expect(failed).toEqual([{ item_id: bFirst, reason: 'carrier refused' }]);
  });

  it("fails only the lane whose report the database refuses, its group's others recorded", async () => {
    const { operationId, batches, record } = await withLanes(30, 3, ['a', 'b', 'c']);
    const [bad] = batches.get('b') as string[];
    // A reason Postgres cannot store (text holds no NUL): b's call fails; a went alone, c with b.
    const [a, b, c] = await Promise.allSettled([
      record('a'),
      record('b', { failed: [{ id: bad as string, reason: 'carrier said \u0000' }] }),
      record('c'),
    ]);
    expect(a.status).toBe('fulfilled');
    expect(b.status).toBe('rejected');
    expect(c.status).toBe('fulfilled');
    expect(c.status === 'fulfilled' && c.value.next?.kind).toBe('leased');
    expect(await operationRow(operationId)).toMatchObject({ completed_count: 6, failed_count: 0 });
    const bItems = await db.query<{ status: string; lease_owner: string | null }>(
      `SELECT status, lease_owner FROM (${ITEM_STATES}) i WHERE operation_id = $1 AND item_id = ANY($2)`,
      [operationId, batches.get('b')],
    );
    expect(bItems.every((row) => row.status === 'leased' && row.lease_owner === 'b')).toBe(true);
  });

  it('records the lanes of a paused operation and leases them nothing', async () => {
    const owners = ['a', 'b', 'c'];
    const { scope, operationId, record } = await withLanes(30, 4, owners);
    await pauseOperation(db, scope, operationId, { actor: 'test', reason: 'test', pausedBy: 'assistant' });
    const results = await Promise.all(owners.map((owner) => record(owner)));
    expect(results.map((result) => result.next?.kind)).toEqual(['declined', 'declined', 'declined']);
    expect(await operationRow(operationId)).toMatchObject({ completed_count: 12, cursor: 12, status: 'paused' });
    const leases = await db.query('SELECT owner FROM assistant_operation_lease WHERE operation_id = $1', [operationId]);
    expect(leases).toEqual([]);
  });

  it('leases each lane of a group within its own limit, in lane order, until the items run out', async () => {
    const owners = ['a', 'b', 'c'];
    const { operationId, record } = await withLanes(18, 4, owners);
    // a goes alone and takes 12–15; b (at most 1 item) and c go together after it.
    const [a, b, c] = await Promise.all([record('a'), record('b', { batchSize: 1 }), record('c')]);
    const batch = (result: RecordResult | undefined) => (result?.next?.kind === 'leased' ? result.next.batch : []);
    expect(batch(a)).toEqual(ids(18).slice(12, 16));
    expect(batch(b)).toEqual(ids(18).slice(16, 17));
    expect(batch(c)).toEqual(ids(18).slice(17, 18));
    expect(await operationRow(operationId)).toMatchObject({ completed_count: 12, cursor: 18 });
    const leased = await db.query<{ actor: string; count: number; first_ordinal: number }>(
      `SELECT actor, (data->>'count')::int AS count, (data->>'first_ordinal')::int AS first_ordinal
       FROM operation_event WHERE operation_id = $1 AND kind = 'batch_leased' ORDER BY id`,
      [operationId],
    );
    expect(leased.slice(3)).toEqual([
      { actor: 'a', count: 4, first_ordinal: 12 },
      { actor: 'b', count: 1, first_ordinal: 16 },
      { actor: 'c', count: 1, first_ordinal: 17 },
    ]);
  });

  it('tells each of the last lanes that no item is pending', async () => {
    const owners = ['a', 'b', 'c'];
    const { operationId, record } = await withLanes(12, 4, owners);
    const results = await Promise.all(owners.map((owner) => record(owner)));
    // Nothing left to lease for any of them (a's answer while b's and c's were still in flight).
    expect(results.map((result) => result.next?.kind)).toEqual(['none', 'none', 'none']);
    expect(results[0]?.counts).toMatchObject({ completed_count: 4, in_flight_count: 8 });
    expect(results[2]?.counts).toMatchObject({ completed_count: 12, remaining_count: 0, in_flight_count: 0 });
    expect(await operationRow(operationId)).toMatchObject({ completed_count: 12, cursor: 12 });
  });
});

describe('lanes of two processes on one operation', () => {
  it('record every item exactly once while each process groups its own lanes', async () => {
    const first = await openTestDatabase('postgres');
    const second = await openTestDatabase('postgres');
    try {
      const items = 1200;
      const { scope, operationId } = await newStoreOperation(first, items, 10);
      // Four lanes a process, each recording its batch and leasing the next until none is left.
      const lane = async (db: OpspadDatabase, owner: string) => {
        let batch = (await leaseBatch(db, scope, { operationId, owner, ...LEASE })).batch;
        let recorded = 0;
        for (let round = 0; batch.length > 0 && round < items; round++) {
          const result = await recordResults(db, scope, {
            operationId,
            completedIds: batch,
            failed: [],
            owner,
            leaseNext: LEASE,
          });
          recorded += batch.length;
          batch =
            result.next?.kind === 'leased'
              ? result.next.batch
              : (await leaseBatch(db, scope, { operationId, owner, ...LEASE })).batch;
        }
        return recorded;
      };
      const counts = await Promise.all([first, second].flatMap((db) => [1, 2, 3, 4].map(() => lane(db, randomUUID()))));
      expect(counts.reduce((sum, n) => sum + n, 0)).toBe(items);
      const rows = await first.query<{ status: string; attempts: number; n: number }>(
        `SELECT status, attempts, count(*)::int AS n FROM assistant_operation_item WHERE operation_id = $1
         GROUP BY status, attempts`,
        [operationId],
      );
      expect(rows).toEqual([{ status: 'completed', attempts: 1, n: items }]);
      const op = await first.query<{ completed_count: number; cursor: number }>(
        `SELECT completed_count, (state_json->>'cursor')::int AS cursor FROM assistant_operation WHERE id = $1`,
        [operationId],
      );
      expect(op[0]).toEqual({ completed_count: items, cursor: items });
      // Some calls did carry several lanes (the point of it), each lane's record its own event.
      const grouped = await first.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM (
           SELECT e.tx FROM (SELECT xmin::text AS tx FROM operation_event
                             WHERE operation_id = $1 AND kind = 'batch_recorded') e
           GROUP BY e.tx HAVING count(*) > 1) g`,
        [operationId],
      );
      expect(grouped[0]?.n).toBeGreaterThan(0);
      const recorded = await first.query<{ n: number }>(
        `SELECT coalesce(sum((data->>'completed')::int), 0)::int AS n FROM operation_event
         WHERE operation_id = $1 AND kind = 'batch_recorded'`,
        [operationId],
      );
      expect(recorded[0]?.n).toBe(items);
    } finally {
      await first.close();
      await second.close();
    }
  });
});
