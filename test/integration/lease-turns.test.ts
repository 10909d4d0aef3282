/**
 * Leases of one operation take turns on its row's update lock, so the step functions' lease reads
 * its batch from the cursor without locking the item rows (sql/opspad_lease_from_cursor.sql),
 * and the record of a whole lease writes it by its ordinals (sql/opspad_record_owned.sql). What
 * must hold: lanes on many connections, with the general path's shared lease among them, never
 * share an item and record each once; a lease past a cursor that went back leaves out the items
 * a live lease holds; a report of a whole lease is recorded in any order, and any other report
 * with as many ids is decided id by id; a late report of free items (the general record) and a
 * lease of the same items take turns, and a report of items a worker is recording waits for it;
 * a record that waits for the row while a pause commits leases no next batch.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type OpspadDatabase, pauseOperation, recordResults } from '../../src/store/index.ts';
import { leaseNext } from '../../src/store/leases/item-sql.ts';
import { leaseStep, recordLeaseStep, recordStep } from '../../src/store/leases/step-calls.ts';
import { lockOperationForLease } from '../../src/store/operations/operation-row.ts';
import { fileDatabaseUrl } from '../helpers/file-database.ts';
import { ENGINES, ids, newStoreOperation, openTestDatabase } from '../helpers/harness.ts';
import { eventually } from '../helpers/wait.ts';

describe.each(ENGINES)('leases taking turns on %s', (engine) => {
  let db: OpspadDatabase;

  beforeAll(async () => {
    db = await openTestDatabase(engine);
  });
  afterAll(async () => {
    await db.close();
  });

  const itemRows = (operationId: string) =>
    db.query<{ item_id: string; status: string; attempts: number }>(
      'SELECT item_id, status, attempts FROM assistant_operation_item WHERE operation_id = $1 ORDER BY ordinal',
      [operationId],
    );
  const counters = async (operationId: string) =>
    (
      await db.query<{ completed_count: number; failed_count: number; cursor: number }>(
        `SELECT completed_count, failed_count, (state_json->>'cursor')::int AS cursor
         FROM assistant_operation WHERE id = $1`,
        [operationId],
      )
    )[0];

  it('gives lanes on many connections, the general lease among them, disjoint batches, each item recorded once', async () => {
    const items = 600;
    const { scope, operationId } = await newStoreOperation(db, items, 7);
    const leased: string[] = [];

    // A lane of the step functions: its first lease, then a record that leases the next batch.
    const stepLane = async (owner: string) => {
      let batch = (await leaseStep(db, scope, { operationId, owner, leaseSeconds: 300 }))?.batch ?? [];
      for (let turn = 0; turn < items && batch.length > 0; turn++) {
        leased.push(...batch);
        const step = await recordLeaseStep(db, scope, {
          operationId,
          owner,
          ids: batch,
          reasons: null,
          leaseSeconds: 300,
        });
        expect(step, `${owner}'s record of its own batch`).not.toBeNull();
        batch = step?.next.kind === 'leased' ? step.next.batch : [];
      }
    };
    // A lane of the general lease's shared mode (operation-lease.ts): the row's update lock, the
    // general statement, the cursor moved forward; recorded through the general record.
    const generalLane = async (owner: string) => {
      for (let turn = 0; turn < items; turn++) {
        const batch = await db.transaction(async (tx) => {
          const { op } = await lockOperationForLease(tx, scope, operationId, 'shared', owner, undefined);
          const taken = await leaseNext(tx, operationId, owner, 300, op.state_json.cursor, 5, true);
          const last = taken.at(-1);
          if (last) {
            await tx.query(
              `UPDATE assistant_operation SET state_json = opspad_cursor_forward(state_json, $2) WHERE id = $1`,
              [operationId, last.ordinal + 1],
            );
          }
          return taken.map((item) => item.item_id);
        });
        if (batch.length === 0) {
          return;
        }
        leased.push(...batch);
        const recorded = await recordResults(db, scope, { operationId, completedIds: batch, failed: [], owner });
        expect(recorded.leaseConflicts).toEqual([]);
      }
    };
    await Promise.all([
      ...['s1', 's2', 's3', 's4', 's5'].map((owner) => stepLane(owner)),
      ...['g1', 'g2'].map((owner) => generalLane(owner)),
    ]);

    // Items the lanes could not find from the cursor (the tail) go to a last general lease.
    const rest = await leaseStep(db, scope, { operationId, owner: 'tail', leaseSeconds: 300 });
    expect(rest?.batch ?? []).toEqual([]);
    expect(new Set(leased).size).toBe(leased.length);
    expect([...leased].sort()).toEqual([...ids(items)].sort());
    const rows = await itemRows(operationId);
    expect(rows.every((row) => row.status === 'completed' && row.attempts === 1)).toBe(true);
    expect(await counters(operationId)).toMatchObject({ completed_count: items, failed_count: 0 });
  });

  it('leaves out the items a live lease holds when the cursor has gone back behind it', async () => {
    const { scope, operationId } = await newStoreOperation(db, 30, 10);
    const first = await leaseStep(db, scope, { operationId, owner: 'a', leaseSeconds: 300 });
    const second = await leaseStep(db, scope, { operationId, owner: 'b', leaseSeconds: 300 });
    expect(first?.batch).toEqual(ids(30).slice(0, 10));
    expect(second?.batch).toEqual(ids(30).slice(10, 20));
    // a's lease given up and the cursor back at its start, as a reclaim leaves them; b's still live.
    await db.query(`DELETE FROM assistant_operation_lease WHERE operation_id = $1 AND owner = 'a'`, [operationId]);
    await db.query(`UPDATE assistant_operation SET state_json = jsonb_set(state_json, '{cursor}', '0') WHERE id = $1`, [
      operationId,
    ]);

    const again = await leaseStep(db, scope, { operationId, owner: 'c', leaseSeconds: 300 });
    expect(again?.batch).toEqual(ids(30).slice(0, 10));
    const past = await leaseStep(db, scope, { operationId, owner: 'd', leaseSeconds: 300 });
    expect(past?.batch).toEqual(ids(30).slice(20, 30));
    expect(await counters(operationId)).toMatchObject({ cursor: 30 });
  });

  it('records a whole lease reported in any order, by range or not, and decides any other report id by id', async () => {
    const { scope, operationId } = await newStoreOperation(db, 12, 4);
    const whole = await leaseStep(db, scope, { operationId, owner: 'w', leaseSeconds: 300 });
    const reversed = [...(whole?.batch ?? [])].reverse();
    expect(await recordStep(db, scope, { operationId, owner: 'w', ids: reversed, reasons: null })).not.toBeNull();

    // A lease whose ordinals do not follow each other (as one taken behind the cursor can be):
    // 4, 6 and 7, item 5 recorded by the assistant.
    const gappy = await leaseStep(db, scope, { operationId, owner: 'x', leaseSeconds: 300 });
    expect(gappy?.batch).toEqual(ids(12).slice(4, 8));
    await recordResults(db, scope, { operationId, completedIds: [ids(12)[5] as string], failed: [], owner: 'x' });
    await db.query(
      `UPDATE assistant_operation_lease SET ordinals = ARRAY[4, 6, 7], remaining = 3
       WHERE operation_id = $1 AND owner = 'x'`,
      [operationId],
    );
    const rest = [ids(12)[4], ids(12)[6], ids(12)[7]] as string[];
    expect(await recordStep(db, scope, { operationId, owner: 'x', ids: rest, reasons: null })).not.toBeNull();

    // As many ids as the lease holds, one of them not the lease's: the step declines, changing
    // nothing, and the general record says which.
    const last = await leaseStep(db, scope, { operationId, owner: 'y', leaseSeconds: 300 });
    const wrong = [...(last?.batch ?? []).slice(0, 3), ids(12)[0] as string];
    expect(await recordStep(db, scope, { operationId, owner: 'y', ids: wrong, reasons: null })).toBeNull();
    expect((await itemRows(operationId)).slice(8).map((row) => row.status)).toEqual([
      'pending',
      'pending',
      'pending',
      'pending',
    ]);
    const decided = await recordResults(db, scope, { operationId, completedIds: wrong, failed: [], owner: 'y' });
    expect(decided.alreadyRecorded).toEqual([ids(12)[0]]);
    expect((await itemRows(operationId)).map((row) => row.status)).toEqual([...Array(11).fill('completed'), 'pending']);
    expect(await counters(operationId)).toMatchObject({ completed_count: 11, failed_count: 0 });
  });
});

describe('a general record beside a lease or a record of the same items (postgres)', () => {
  let db: OpspadDatabase;
  let holder: pg.Client;
  let holderPid: number;

  beforeAll(async () => {
    db = await openTestDatabase('postgres');
    holder = new pg.Client({ connectionString: fileDatabaseUrl() });
    await holder.connect();
    holderPid = (await holder.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]?.pid as number;
  });
  afterAll(async () => {
    await holder.end();
    await db.close();
  });

  /** Backends waiting for the holder's transaction, or in line behind one that is. */
  const waitingOnHolder = async (count: number) => {
    const rows = await db.query<{ n: number }>(
      `WITH w AS (SELECT pid, pg_blocking_pids(pid) AS blockers FROM pg_stat_activity)
       SELECT count(*)::int AS n FROM w
       WHERE $1 = ANY(w.blockers) OR EXISTS (SELECT 1 FROM w AS first WHERE $1 = ANY(first.blockers) AND first.pid = ANY(w.blockers))`,
      [holderPid],
    );
    return (rows[0]?.n ?? 0) >= count ? true : undefined;
  };

  it('never leases an item that a late report is recording, nor records one a lease took', async () => {
    const { scope, operationId } = await newStoreOperation(db, 10, 5);
    // A late worker's batch: its lease gone and the cursor back at its start, as a reclaim leaves
    // them, so items 1 to 5 are free and its report goes to the general record.
    await leaseStep(db, scope, { operationId, owner: 'late', leaseSeconds: 300 });
    await db.query(`DELETE FROM assistant_operation_lease WHERE operation_id = $1`, [operationId]);
    await db.query(`UPDATE assistant_operation SET state_json = jsonb_set(state_json, '{cursor}', '0') WHERE id = $1`, [
      operationId,
    ]);

    // A lease of the step functions, taken by hand in a transaction of the test's: the row's
    // update lock, then (once the report waits for it) the lease from the cursor, which reads
    // without row locks. A report that wrote its items before taking that lock would have them
    // written, uncommitted, by then: the lease would take them and the report record them.
    await holder.query('BEGIN');
    await holder.query('SELECT 1 FROM assistant_operation WHERE id = $1 FOR NO KEY UPDATE', [operationId]);
    const report = recordResults(db, scope, {
      operationId,
      completedIds: ids(10).slice(0, 5),
      failed: [],
      owner: 'late',
    });
    await eventually(() => waitingOnHolder(1), { what: 'the report to wait' });
    const lease = await holder.query<{ taken_ids: string[] }>(
      `SELECT taken_ids FROM opspad_lease_from_cursor($1, 'next', 300, 0, 5)`,
      [operationId],
    );
    await holder.query('COMMIT');

    const leased = lease.rows[0]?.taken_ids ?? [];
    const recorded = await report;
    expect(leased).toEqual(ids(10).slice(0, 5));
    expect(recorded.leaseConflicts).toEqual(ids(10).slice(0, 5));
    const completed = await db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM assistant_operation_item WHERE operation_id = $1 AND status = 'completed'`,
      [operationId],
    );
    expect(completed[0]?.n).toBe(0);
  });

  it('leases no next batch when a pause commits while the record waits for the row', async () => {
    const { scope, operationId } = await newStoreOperation(db, 10, 5);
    const batch = (await leaseStep(db, scope, { operationId, owner: 'worker', leaseSeconds: 300 }))?.batch ?? [];
    expect(batch).toEqual(ids(10).slice(0, 5));

    // A pause as an admission writes it: an update of the row, which the record's key-share
    // lock does not wait for. The record reads the row as active, records its batch, and then
    // waits for the update lock; once it has it, the pause has committed, and the operation
    // hands out no new batch.
    await holder.query('BEGIN');
    await holder.query(`UPDATE assistant_operation SET status = 'paused' WHERE id = $1`, [operationId]);
    const step = recordLeaseStep(db, scope, {
      operationId,
      owner: 'worker',
      ids: batch,
      reasons: null,
      leaseSeconds: 300,
    });
    await eventually(() => waitingOnHolder(1), { what: 'the record to wait for the row' });
    await holder.query('COMMIT');

    const recorded = await step;
    expect(recorded?.counts).toMatchObject({ completed_count: 5, in_flight_count: 0 });
    expect(recorded?.next.kind).not.toBe('leased');
    const leased = await db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM assistant_operation_lease WHERE operation_id = $1 AND remaining > 0`,
      [operationId],
    );
    expect(leased[0]?.n).toBe(0);
  });

  it('leases no next batch for a group of lanes either when a pause commits meanwhile', async () => {
    const { scope, operationId } = await newStoreOperation(db, 10, 2);
    const lanes = ['lane-a', 'lane-b'];
    const batches: string[][] = [];
    for (const owner of lanes) {
      batches.push((await leaseStep(db, scope, { operationId, owner, leaseSeconds: 300 }))?.batch ?? []);
    }
    expect(batches.flat()).toEqual(ids(10).slice(0, 4));

    await holder.query('BEGIN');
    await holder.query(`UPDATE assistant_operation SET status = 'paused' WHERE id = $1`, [operationId]);
    // The grouped call (step-groups.ts) as a process's two lanes send it.
    const group = db.query<{ lane_owner: string; lease: string; completed_count: number }>(
      `SELECT lane_owner, lease, completed_count
       FROM opspad_record_lease_steps($1, $2, $3, $4, $5, $6, NULL, 300, $7, NULL)`,
      [operationId, scope.organizationId, scope.conversationId, lanes, [2, 2], batches.flat(), [null, null]],
    );
    await eventually(() => waitingOnHolder(1), { what: 'the group to wait for the row' });
    await holder.query('COMMIT');

    const rows = await group;
    expect(rows.map((row) => row.lane_owner)).toEqual(lanes);
    expect(rows.map((row) => row.lease)).not.toContain('leased');
    expect(rows.at(-1)?.completed_count).toBe(4);
    const leased = await db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM assistant_operation_lease WHERE operation_id = $1 AND remaining > 0`,
      [operationId],
    );
    expect(leased[0]?.n).toBe(0);
  });

  it("lets an assistant's report of items a worker is recording wait for it, without a deadlock", async () => {
    const { scope, operationId } = await newStoreOperation(db, 10, 5);
    const batch = (await leaseStep(db, scope, { operationId, owner: 'worker', leaseSeconds: 300 }))?.batch ?? [];
    expect(batch).toEqual(ids(10).slice(0, 5));

    // The assistant's report (the general record) asks first and the worker's record second,
    // both behind a transaction holding the row's update lock. A general record that took that
    // lock before locking its items would, once released, wait for the items the worker's record
    // has written, while the worker's record waits for the lock: a deadlock.
    await holder.query('BEGIN');
    await holder.query('SELECT 1 FROM assistant_operation WHERE id = $1 FOR NO KEY UPDATE', [operationId]);
    const assistant = recordResults(db, scope, { operationId, completedIds: batch, failed: [], owner: 'assistant' });
    await eventually(() => waitingOnHolder(1), { what: "the assistant's report to wait" });
    const worker = recordStep(db, scope, { operationId, owner: 'worker', ids: batch, reasons: null });
    await eventually(() => waitingOnHolder(2), { what: "the worker's record to wait" });
    await holder.query('COMMIT');

    const [told, recorded] = await Promise.all([assistant, worker]);
    expect(told.leaseConflicts).toEqual(batch);
    expect(recorded?.counts).toMatchObject({ completed_count: 5, in_flight_count: 0 });
  });
  it("completes the operation with a worker's record of its last items, unless a pause came first", async () => {
    const status = async (operationId: string) =>
      (await db.query<{ status: string }>('SELECT status FROM assistant_operation WHERE id = $1', [operationId]))[0]
        ?.status;
    const completedEvents = (operationId: string) =>
      db.query<{ actor: string; data: unknown }>(
        `SELECT actor, data FROM operation_event WHERE operation_id = $1 AND kind = 'completed'`,
        [operationId],
      );
    const leaseAndRecord = async (
      scope: { organizationId: string; conversationId: string },
      operationId: string,
      completeWhenDone?: boolean,
    ) => {
      const leased = await leaseStep(db, scope, { operationId, owner: 'lane', leaseSeconds: 300 });
      const batch = leased?.batch ?? [];
      expect(batch.length).toBeGreaterThan(0);
      return recordStep(db, scope, { operationId, owner: 'lane', ids: batch, reasons: null, completeWhenDone });
    };

    // A worker's records: the one that leaves nothing to record completes the operation, once.
    const worker = await newStoreOperation(db, 10, 5);
    expect((await leaseAndRecord(worker.scope, worker.operationId, true))?.operation.status).toBe('active');
    const last = await leaseAndRecord(worker.scope, worker.operationId, true);
    expect(last?.operation.status).toBe('completed');
    expect(last?.counts).toMatchObject({ completed_count: 10, remaining_count: 0, in_flight_count: 0 });
    expect(await completedEvents(worker.operationId)).toEqual([
      { actor: 'worker', data: { forced: false, abandoned: 0 } },
    ]);

    // Any other record of the last items (an assistant's) leaves the completion to its caller.
    const other = await newStoreOperation(db, 5, 5);
    expect((await leaseAndRecord(other.scope, other.operationId))?.operation.status).toBe('active');
    expect(await completedEvents(other.operationId)).toEqual([]);

    // A pause that committed before the record wins: the items are recorded, the operation stays paused.
    const paused = await newStoreOperation(db, 5, 5);
    const leased = await leaseStep(db, paused.scope, {
      operationId: paused.operationId,
      owner: 'lane',
      leaseSeconds: 300,
    });
    await pauseOperation(db, paused.scope, paused.operationId, {
      actor: 'test',
      reason: 'operator',
      pausedBy: 'operator:ops',
    });
    const recorded = await recordStep(db, paused.scope, {
      operationId: paused.operationId,
      owner: 'lane',
      ids: leased?.batch ?? [],
      reasons: null,
      completeWhenDone: true,
    });
    expect(recorded?.counts).toMatchObject({ completed_count: 5, remaining_count: 0 });
    expect(await status(paused.operationId)).toBe('paused');
    expect(await completedEvents(paused.operationId)).toEqual([]);
  });
});
