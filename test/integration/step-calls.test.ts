/**
 * The one-round-trip lease and record (src/store/leases/step-calls.ts, drizzle/0008_step_functions.sql):
 * the usual case is one statement and answers what the general transaction answers; every other
 * case is left to the general transaction with nothing changed first, and the calls agree with
 * the lifecycle table on which statuses they serve. A worker's record that leases its lane's next
 * batch (drizzle/0011_record_lease_step.sql) is one statement too, and leaves the state the two
 * calls leave. Each function plans its statements once per connection (drizzle/0012).
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OPERATION_STATUS } from '../../src/domain/operation.ts';
import { LIFECYCLE } from '../../src/domain/operation-lifecycle.ts';
import { completeOperation, leaseBatch, type OpspadDatabase, recordResults } from '../../src/store/index.ts';
import { leaseStep, recordLeaseStep, recordStep } from '../../src/store/leases/step-calls.ts';
import { counting, ENGINES, ids, newStoreOperation, openTestDatabase } from '../helpers/harness.ts';
import { ITEM_STATES } from '../helpers/item-states.ts';

describe.each(ENGINES)('one-round-trip lease and record on %s', (engine) => {
  let db: OpspadDatabase;

  beforeAll(async () => {
    db = await openTestDatabase(engine);
  });
  afterAll(async () => {
    await db.close();
  });

  const newOperation = (items: number, batchSize: number, extra: { maxFailureRate?: number } = {}) =>
    newStoreOperation(db, items, batchSize, extra);

  const itemRows = (operationId: string) =>
    db.query<{ item_id: string; status: string; lease_owner: string | null }>(
      `SELECT item_id, status, lease_owner FROM (${ITEM_STATES}) i WHERE operation_id = $1 ORDER BY ordinal`,
      [operationId],
    );
  const events = (operationId: string) =>
    db.query<{ kind: string; actor: string; data: Record<string, unknown> }>(
      `SELECT kind, actor, data FROM operation_event WHERE operation_id = $1 AND kind <> 'created' ORDER BY id`,
      [operationId],
    );

  it('leases and records the usual batch in one statement each, with the answer and audit of the general path', async () => {
    const { scope, operationId } = await newOperation(10, 4);
    const { db: counted, statements } = counting(db);

    const lease = await leaseBatch(counted, scope, { operationId, owner: 'w1', leaseSeconds: 300 });
    expect(statements()).toBe(1);
    expect(lease.batch).toEqual(ids(10).slice(0, 4));
    expect(lease.counts).toMatchObject({ total_items: 10, remaining_count: 10, in_flight_count: 4 });
    expect(lease.operation.state_json.cursor).toBe(4);

    const recorded = await recordResults(counted, scope, {
      operationId,
      completedIds: lease.batch.slice(0, 3),
      failed: [{ id: lease.batch[3] as string, reason: 'carrier refused' }],
      owner: 'w1',
    });
    expect(statements()).toBe(2);
    expect(recorded).toMatchObject({ alreadyRecorded: [], leaseConflicts: [] });
    expect(recorded.counts).toMatchObject({
      completed_count: 3,
      failed_count: 1,
      remaining_count: 6,
      in_flight_count: 0,
    });

    const next = await leaseBatch(counted, scope, { operationId, owner: 'w2', leaseSeconds: 300 });
    await recordResults(counted, scope, { operationId, completedIds: next.batch, failed: [], owner: 'w2' });
    expect(statements()).toBe(4);

    expect((await itemRows(operationId)).slice(0, 8).map((r) => r.status)).toEqual([
      ...['completed', 'completed', 'completed', 'failed'],
      ...['completed', 'completed', 'completed', 'completed'],
    ]);
    expect(await events(operationId)).toEqual([
      { kind: 'batch_leased', actor: 'w1', data: { count: 4, first_ordinal: 0, last_ordinal: 3 } },
      {
        kind: 'batch_recorded',
        actor: 'w1',
        data: { completed: 3, failed: 1, already_recorded: 0, lease_conflicts: 0 },
      },
      { kind: 'batch_leased', actor: 'w2', data: { count: 4, first_ordinal: 4, last_ordinal: 7 } },
      {
        kind: 'batch_recorded',
        actor: 'w2',
        data: { completed: 4, failed: 0, already_recorded: 0, lease_conflicts: 0 },
      },
    ]);
    const leases = await db.query('SELECT owner FROM assistant_operation_lease WHERE operation_id = $1', [operationId]);
    expect(leases).toEqual([]); // both batches spent: their lease rows are gone
  });

  it('answers "no batch" in one statement when no item is pending, and moves the cursor to the end', async () => {
    const { scope, operationId } = await newOperation(6, 3);
    const a = await leaseBatch(db, scope, { operationId, owner: 'a', leaseSeconds: 300 });
    await leaseBatch(db, scope, { operationId, owner: 'b', leaseSeconds: 300 });
    const eventsBefore = await events(operationId);
    const { db: counted, statements } = counting(db);

    // Every item in flight: nothing to lease, nothing changed, no lease row for the caller.
    const inFlight = await leaseBatch(counted, scope, { operationId, owner: 'c', leaseSeconds: 300 });
    expect(statements()).toBe(1);
    expect(inFlight.batch).toEqual([]);
    expect(inFlight.counts).toMatchObject({ remaining_count: 6, in_flight_count: 6 });
    expect(await events(operationId)).toEqual(eventsBefore);
    const owners = await db.query<{ owner: string }>(
      'SELECT owner FROM assistant_operation_lease WHERE operation_id = $1 ORDER BY owner',
      [operationId],
    );
    expect(owners.map((row) => row.owner)).toEqual(['a', 'b']);

    // One batch recorded: its lease row is spent, and the empty answer drops it as the general path does.
    await db.query('UPDATE assistant_operation_lease SET remaining = 0 WHERE operation_id = $1 AND owner = $2', [
      operationId,
      'a',
    ]);
    await db.query(`UPDATE assistant_operation SET completed_count = 3 WHERE id = $1`, [operationId]);
    await db.query(
      `UPDATE assistant_operation_item SET status = 'completed' WHERE operation_id = $1 AND item_id = ANY($2)`,
      [operationId, a.batch],
    );
    const spent = await leaseBatch(counted, scope, { operationId, owner: 'c', leaseSeconds: 300 });
    expect(statements()).toBe(2);
    expect(spent.counts).toMatchObject({ completed_count: 3, remaining_count: 3, in_flight_count: 3 });
    expect(
      await db.query('SELECT owner FROM assistant_operation_lease WHERE operation_id = $1', [operationId]),
    ).toEqual([{ owner: 'b' }]);

    // Items recorded without a lease leave the cursor behind: the empty answer moves it to the end.
    const direct = await newOperation(4, 2);
    await recordResults(db, direct.scope, {
      operationId: direct.operationId,
      completedIds: ids(4),
      failed: [],
      owner: 'x',
    });
    const done = await leaseBatch(counted, direct.scope, {
      operationId: direct.operationId,
      owner: 'x',
      leaseSeconds: 300,
    });
    expect(statements()).toBe(3);
    expect(done).toMatchObject({ batch: [], counts: { remaining_count: 0, in_flight_count: 0 } });
    expect(done.operation.state_json.cursor).toBe(4);
  });

  it('leaves pending items it cannot find from the cursor to the general path, changing nothing', async () => {
    const { scope, operationId } = await newOperation(6, 3);
    // Pending items behind the cursor (what a lease that rolled back behind another leaves).
    await db.query(`UPDATE assistant_operation SET state_json = jsonb_set(state_json, '{cursor}', '6') WHERE id = $1`, [
      operationId,
    ]);
    const before = await itemRows(operationId);
    expect(await leaseStep(db, scope, { operationId, owner: 'a', leaseSeconds: 300 })).toBeNull();
    expect(await itemRows(operationId)).toEqual(before);
    const found = await leaseBatch(db, scope, { operationId, owner: 'a', leaseSeconds: 300 });
    expect(found.batch).toEqual(ids(6).slice(0, 3));
  });

  it('never leases what a live lease holds past the cursor, whatever the order of its ordinals', async () => {
    const { scope, operationId } = await newOperation(40, 15);
    // One owner's lease row holding 20..24 then 0..4 (written by the one statement that writes
    // lease rows, extending a row as it does): its highest ordinal is not its last.
    for (const ordinals of [
      [20, 21, 22, 23, 24],
      [0, 1, 2, 3, 4],
    ]) {
      await db.query('SELECT opspad_write_lease($1, $2, $3, 300)', [operationId, 'early', ordinals]);
    }
    const [row] = await db.query<{ max_ordinal: number }>(
      'SELECT max_ordinal FROM assistant_operation_lease WHERE operation_id = $1 AND owner = $2',
      [operationId, 'early'],
    );
    expect(row?.max_ordinal).toBe(24);
    // The cursor stands behind that lease (as a lease alone on the operation can set it back).
    await db.query(
      `UPDATE assistant_operation SET state_json = jsonb_set(state_json, '{cursor}', '10') WHERE id = $1`,
      [operationId],
    );

    const lease = await leaseStep(db, scope, { operationId, owner: 'late', leaseSeconds: 300 });
    expect(lease?.batch).toEqual([...ids(40).slice(10, 20), ...ids(40).slice(25, 30)]);

    // A cursor at a live lease's highest ordinal is behind it too.
    const edge = await newOperation(10, 3);
    await db.query('SELECT opspad_write_lease($1, $2, $3, 300)', [edge.operationId, 'early', [4]]);
    await db.query(`UPDATE assistant_operation SET state_json = jsonb_set(state_json, '{cursor}', '4') WHERE id = $1`, [
      edge.operationId,
    ]);
    const next = await leaseStep(db, edge.scope, { operationId: edge.operationId, owner: 'late', leaseSeconds: 300 });
    expect(next?.batch).toEqual(ids(10).slice(5, 8));
  });
  it('completes an operation with every item recorded in one statement, and leaves every other case to the transaction', async () => {
    const { db: counted, statements } = counting(db);
    for (const status of OPERATION_STATUS) {
      const { scope, operationId } = await newOperation(4, 4);
      const lease = await leaseBatch(db, scope, { operationId, owner: 'a', leaseSeconds: 300 });
      await recordResults(db, scope, { operationId, completedIds: lease.batch, failed: [], owner: 'a' });
      await db.query(
        `UPDATE assistant_operation SET status = $2,
           state_json = state_json || '{"paused_reason": "by hand", "paused_by": "operator"}' WHERE id = $1`,
        [operationId, status],
      );
      const before = statements();
      const done = await completeOperation(counted, scope, operationId, { force: false, actor: 'assistant' }).catch(
        (error: { code?: string }) => error.code,
      );
      const rule = LIFECYCLE.complete[status];
      // One statement exactly when the table changes the status; the transaction (more) otherwise.
      expect({ status, oneStatement: statements() - before === 1 }).toEqual({
        status,
        oneStatement: rule.kind === 'change',
      });
      if (rule.kind === 'change') {
        expect(done).toMatchObject({
          abandoned: 0,
          counts: { completed_count: 4, remaining_count: 0, in_flight_count: 0 },
          operation: { status: 'completed' },
        });
        const state = (done as { operation: { state_json: object } }).operation.state_json;
        expect(state).not.toHaveProperty('paused_reason');
        expect(state).not.toHaveProperty('paused_by');
        expect((await events(operationId)).at(-1)).toEqual({
          kind: 'completed',
          actor: 'assistant',
          data: { forced: false, abandoned: 0 },
        });
      }
    }

    // Items left: declined, and the transaction refuses (or, forced, abandons them).
    const { scope, operationId } = await newOperation(3, 3);
    const before = statements();
    await expect(
      completeOperation(counted, scope, operationId, { force: false, actor: 'assistant' }),
    ).rejects.toMatchObject({ code: 'items_remaining' });
    expect(statements() - before).toBeGreaterThan(1);
    const forced = await completeOperation(db, scope, operationId, { force: true, actor: 'assistant' });
    expect(forced).toMatchObject({ abandoned: 3, operation: { status: 'completed' } });
    // Another conversation's scope: declined, and the transaction answers 404.
    await expect(
      completeOperation(db, { ...scope, conversationId: randomUUID() }, operationId, { force: false, actor: 'x' }),
    ).rejects.toMatchObject({ code: 'not_found' });
  });

  it('serves exactly the statuses the lifecycle table allows a lease and a record in', async () => {
    for (const status of OPERATION_STATUS) {
      const { scope, operationId } = await newOperation(4, 2);
      const held = await leaseStep(db, scope, { operationId, owner: 'holder', leaseSeconds: 300 });
      expect(held).not.toBeNull();
      await db.query('UPDATE assistant_operation SET status = $2 WHERE id = $1', [operationId, status]);

      const lease = await leaseStep(db, scope, { operationId, owner: 'other', leaseSeconds: 300 });
      expect({ status, leased: lease !== null }).toEqual({
        status,
        leased: LIFECYCLE.lease[status].kind === 'allowed',
      });
      const record = await recordStep(db, scope, {
        operationId,
        owner: 'holder',
        ids: held?.batch ?? [],
        reasons: null,
      });
      expect({ status, recorded: record !== null }).toEqual({
        status,
        recorded: LIFECYCLE.record[status].kind === 'allowed',
      });
    }
  });

  it('leaves a renewal, an expired lease and another dispatch epoch to the general path, changing nothing', async () => {
    const { scope, operationId } = await newOperation(12, 3);
    const first = await leaseBatch(db, scope, { operationId, owner: 'a', leaseSeconds: 300 });
    const before = await itemRows(operationId);

    // The caller holds a lease: the call declines; the general path renews the same batch.
    expect(await leaseStep(db, scope, { operationId, owner: 'a', leaseSeconds: 300 })).toBeNull();
    expect(await itemRows(operationId)).toEqual(before);
    expect((await leaseBatch(db, scope, { operationId, owner: 'a', leaseSeconds: 300 })).batch).toEqual(first.batch);

    // Not the operation's dispatch epoch (an assistant operation has none): declined.
    expect(await leaseStep(db, scope, { operationId, owner: 'b', leaseSeconds: 300, epoch: 7 })).toBeNull();

    // An expired lease: declined, and the general path reclaims it.
    await db.query(
      `UPDATE assistant_operation_lease SET expires_at = now() - interval '1 minute' WHERE operation_id = $1 AND owner = 'a'`,
      [operationId],
    );
    const unchanged = await itemRows(operationId);
    expect(await leaseStep(db, scope, { operationId, owner: 'b', leaseSeconds: 300 })).toBeNull();
    expect(await itemRows(operationId)).toEqual(unchanged);
    const reclaiming = await leaseBatch(db, scope, { operationId, owner: 'b', leaseSeconds: 300 });
    expect(reclaiming).toMatchObject({ reclaimed: 3, batch: first.batch });

    // Another organization's scope, or another conversation's: declined, and the general path answers 404.
    expect(
      await leaseStep(db, { ...scope, conversationId: randomUUID() }, { operationId, owner: 'c', leaseSeconds: 300 }),
    ).toBeNull();
    await expect(
      leaseBatch(db, { ...scope, conversationId: randomUUID() }, { operationId, owner: 'c', leaseSeconds: 300 }),
    ).rejects.toMatchObject({ code: 'not_found' });
  });

  it('rolls a report back when one of its ids is not recordable, and the general path says which', async () => {
    const { scope, operationId } = await newOperation(8, 2);
    const mine = await leaseBatch(db, scope, { operationId, owner: 'mine', leaseSeconds: 300 });
    const theirs = await leaseBatch(db, scope, { operationId, owner: 'theirs', leaseSeconds: 300 });
    const report = [...mine.batch, theirs.batch[0] as string];

    expect(await recordStep(db, scope, { operationId, owner: 'mine', ids: report, reasons: null })).toBeNull();
    // Nothing of the declined call stayed: my items are still leased to me.
    expect((await itemRows(operationId)).slice(0, 2)).toEqual(
      mine.batch.map((item_id) => ({ item_id, status: 'leased', lease_owner: 'mine' })),
    );

    const recorded = await recordResults(db, scope, { operationId, completedIds: report, failed: [], owner: 'mine' });
    expect(recorded.leaseConflicts).toEqual([theirs.batch[0]]);
    expect(recorded.counts).toMatchObject({ completed_count: 2, in_flight_count: 2 });
    const again = await recordResults(db, scope, { operationId, completedIds: mine.batch, failed: [], owner: 'mine' });
    expect(again.alreadyRecorded).toEqual(mine.batch);
  });

  it("records a whole lease by its range only when the range's rows are the lease's own", async () => {
    const { scope, operationId } = await newOperation(8, 4);
    const lease = await leaseBatch(db, scope, { operationId, owner: 'mine', leaseSeconds: 300 });
    expect(lease.batch).toEqual(ids(8).slice(0, 4));
    // A lease row whose ordinals span as many as they are without being its range: 0, 1, 7, 3.
    // A report of the range's ids (2, not 7) must not record the item the lease does not hold.
    await db.query(`UPDATE assistant_operation_lease SET ordinals = '{0,1,7,3}' WHERE operation_id = $1`, [
      operationId,
    ]);
    const range = ids(8).slice(0, 4);
    expect(await recordStep(db, scope, { operationId, owner: 'mine', ids: range, reasons: null })).toBeNull();
    const stored = await db.query<{ status: string }>(
      'SELECT status FROM assistant_operation_item WHERE operation_id = $1 ORDER BY ordinal',
      [operationId],
    );
    expect(stored.map((row) => row.status)).toEqual(Array(8).fill('pending'));

    // The same lease's ordinals out of order (an extended lease appends): the general path
    // records it, exactly once.
    await db.query(`UPDATE assistant_operation_lease SET ordinals = '{0,2,1,3}' WHERE operation_id = $1`, [
      operationId,
    ]);
    expect(await recordStep(db, scope, { operationId, owner: 'mine', ids: range, reasons: null })).toBeNull();
    const recorded = await recordResults(db, scope, { operationId, completedIds: range, failed: [], owner: 'mine' });
    expect(recorded).toMatchObject({ alreadyRecorded: [], leaseConflicts: [] });
    expect(recorded.counts).toMatchObject({ completed_count: 4, remaining_count: 4, in_flight_count: 0 });
  });

  it("records a worker's batch and leases its next one in one statement, as the two calls would", async () => {
    const { scope, operationId } = await newOperation(7, 3);
    const { db: counted, statements } = counting(db);
    const first = await leaseBatch(counted, scope, { operationId, owner: 'job-1', leaseSeconds: 300 });

    const recorded = await recordResults(counted, scope, {
      operationId,
      completedIds: first.batch.slice(0, 2),
      failed: [{ id: first.batch[2] as string, reason: 'carrier refused' }],
      owner: 'job-1',
      leaseNext: { leaseSeconds: 300 },
    });
    expect(statements()).toBe(2);
    expect(recorded.next).toEqual({ kind: 'leased', batch: ids(7).slice(3, 6) });
    expect(recorded.counts).toMatchObject({
      completed_count: 2,
      failed_count: 1,
      remaining_count: 4,
      in_flight_count: 3,
    });
    expect(recorded.operation.state_json.cursor).toBe(6);

    // The last item: leased with a batch limit of its own; then nothing is pending at all.
    const second = await recordResults(counted, scope, {
      operationId,
      completedIds: ids(7).slice(3, 6),
      failed: [],
      owner: 'job-1',
      leaseNext: { leaseSeconds: 300, batchSize: 5 },
    });
    expect(second.next).toEqual({ kind: 'leased', batch: [ids(7)[6]] });
    const last = await recordResults(counted, scope, {
      operationId,
      completedIds: [ids(7)[6] as string],
      failed: [],
      owner: 'job-1',
      leaseNext: { leaseSeconds: 300 },
    });
    expect(statements()).toBe(4);
    expect(last.next).toEqual({ kind: 'none' });
    expect(last.counts).toMatchObject({ completed_count: 6, failed_count: 1, remaining_count: 0, in_flight_count: 0 });

    expect((await itemRows(operationId)).map((row) => row.status)).toEqual([
      ...['completed', 'completed', 'failed'],
      ...['completed', 'completed', 'completed', 'completed'],
    ]);
    expect((await events(operationId)).map((event) => [event.kind, event.data])).toEqual([
      ['batch_leased', { count: 3, first_ordinal: 0, last_ordinal: 2 }],
      ['batch_recorded', { completed: 2, failed: 1, already_recorded: 0, lease_conflicts: 0 }],
      ['batch_leased', { count: 3, first_ordinal: 3, last_ordinal: 5 }],
      ['batch_recorded', { completed: 3, failed: 0, already_recorded: 0, lease_conflicts: 0 }],
      ['batch_leased', { count: 1, first_ordinal: 6, last_ordinal: 6 }],
      ['batch_recorded', { completed: 1, failed: 0, already_recorded: 0, lease_conflicts: 0 }],
    ]);
    expect(
      await db.query('SELECT owner FROM assistant_operation_lease WHERE operation_id = $1', [operationId]),
    ).toEqual([]);
  });

  it('records a whole lease named by its first id and size, and nothing when the name does not fit', async () => {
    const { scope, operationId } = await newOperation(12, 4);
    const first = await leaseBatch(db, scope, { operationId, owner: 'job-1', leaseSeconds: 300 });
    const whole = (firstId: string, size: number, extra: { reasons?: (string | null)[] } = {}) =>
      recordLeaseStep(db, scope, {
        operationId,
        owner: 'job-1',
        ids: [firstId],
        reasons: extra.reasons ?? null,
        whole: size,
        leaseSeconds: 300,
      });
    const unchanged = async () => {
      const before = { items: await itemRows(operationId), events: await events(operationId) };
      return async () => {
        expect(await itemRows(operationId)).toEqual(before.items);
        expect(await events(operationId)).toEqual(before.events);
      };
    };

    // A name that does not fit the lease is refused, changing nothing: another first id, another
    // size, a reason, a first id of the lease's that is not its first.
    let check = await unchanged();
    expect(await whole(first.batch[1] as string, 4)).toBeNull();
    expect(await whole(first.batch[0] as string, 3)).toBeNull();
    expect(await whole(first.batch[0] as string, 5)).toBeNull();
    expect(await whole(first.batch[0] as string, 4, { reasons: ['refused'] })).toBeNull();
    await check();

    const recorded = await whole(first.batch[0] as string, 4);
    expect(recorded?.next).toEqual({ kind: 'leased', batch: ids(12).slice(4, 8) });
    expect(recorded?.counts).toMatchObject({ completed_count: 4, remaining_count: 8, in_flight_count: 4 });

    // The same report again (a repeated call) names the batch before: refused, so the lease the
    // first call took, of the same size, is not recorded in its place.
    check = await unchanged();
    expect(await whole(first.batch[0] as string, 4)).toBeNull();
    await check();

    // One row of the lease recorded meanwhile (as a worker that took it over after an expiry
    // would): the range is no longer the lease's own, refused.
    await db.query(
      `UPDATE assistant_operation_item SET status = 'completed' WHERE operation_id = $1 AND item_id = $2`,
      [operationId, ids(12)[6]],
    );
    check = await unchanged();
    expect(await whole(ids(12)[4] as string, 4)).toBeNull();
    await check();

    expect((await itemRows(operationId)).map((row) => row.status)).toEqual([
      ...['completed', 'completed', 'completed', 'completed'],
      ...['leased', 'leased', 'completed', 'leased'],
      ...['pending', 'pending', 'pending', 'pending'],
    ]);
    expect((await events(operationId)).map((event) => [event.kind, event.data])).toEqual([
      ['batch_leased', { count: 4, first_ordinal: 0, last_ordinal: 3 }],
      ['batch_recorded', { completed: 4, failed: 0, already_recorded: 0, lease_conflicts: 0 }],
      ['batch_leased', { count: 4, first_ordinal: 4, last_ordinal: 7 }],
    ]);
  });

  it('refuses a whole lease whose ordinals only begin and end like the range', async () => {
    const { scope, operationId } = await newOperation(12, 4);
    // A lease row of four ordinals from 8 to 11 that holds 5 and 6, not 9 and 10.
    await db.query(
      `INSERT INTO assistant_operation_lease (operation_id, owner, ordinals, remaining, expires_at, max_ordinal)
       VALUES ($1, 'odd', '{8,5,6,11}', 4, now() + interval '5 minutes', 11)`,
      [operationId],
    );
    const before = await itemRows(operationId);
    const recorded = await recordLeaseStep(db, scope, {
      operationId,
      owner: 'odd',
      ids: [ids(12)[8] as string],
      reasons: null,
      whole: 4,
      leaseSeconds: 300,
    });
    expect(recorded).toBeNull();
    expect(await itemRows(operationId)).toEqual(before);
  });

  it('records and leaves the lease to the caller when the lease is not the usual case', async () => {
    const { scope, operationId } = await newOperation(12, 3);
    const mine = await leaseBatch(db, scope, { operationId, owner: 'job-1', leaseSeconds: 300 });
    const other = await leaseBatch(db, scope, { operationId, owner: 'job-2', leaseSeconds: 300 });
    // Another lane's lease has expired: only the general lease reclaims it. The record stands.
    await db.query(
      `UPDATE assistant_operation_lease SET expires_at = now() - interval '1 minute' WHERE operation_id = $1 AND owner = 'job-2'`,
      [operationId],
    );
    const recorded = await recordLeaseStep(db, scope, {
      operationId,
      owner: 'job-1',
      ids: mine.batch,
      reasons: null,
      leaseSeconds: 300,
    });
    expect(recorded?.next).toEqual({ kind: 'declined' });
    expect(recorded?.counts).toMatchObject({ completed_count: 3, in_flight_count: 3 });
    const reclaimed = await leaseBatch(db, scope, { operationId, owner: 'job-1', leaseSeconds: 300 });
    expect(reclaimed).toMatchObject({ reclaimed: 3, batch: other.batch });

    // Another lane generation, or a pause that came meanwhile: recorded, nothing leased.
    const next = await recordLeaseStep(db, scope, {
      operationId,
      owner: 'job-1',
      ids: other.batch,
      reasons: null,
      leaseSeconds: 300,
      epoch: 7,
    });
    expect(next).toMatchObject({ next: { kind: 'declined' }, counts: { completed_count: 6, in_flight_count: 0 } });
    const third = await leaseBatch(db, scope, { operationId, owner: 'job-3', leaseSeconds: 300 });
    await db.query(`UPDATE assistant_operation SET status = 'paused' WHERE id = $1`, [operationId]);
    const paused = await recordLeaseStep(db, scope, {
      operationId,
      owner: 'job-3',
      ids: third.batch,
      reasons: null,
      leaseSeconds: 300,
    });
    expect(paused).toMatchObject({ next: { kind: 'declined' }, counts: { completed_count: 9 } });
    expect(
      (await itemRows(operationId)).filter((row) => row.status === 'leased' || row.status === 'pending'),
    ).toHaveLength(3);
  });

  it('leaves the lease to the caller after a partial report, and for items behind the cursor; none when all are in flight', async () => {
    const { scope, operationId } = await newOperation(9, 3);
    const mine = await leaseBatch(db, scope, { operationId, owner: 'job-1', leaseSeconds: 300 });
    const call = { operationId, owner: 'job-1', reasons: null, leaseSeconds: 300 };
    // Two of three reported: the owner's lease still holds one item, so no new lease.
    const partial = await recordLeaseStep(db, scope, { ...call, ids: mine.batch.slice(0, 2) });
    expect(partial).toMatchObject({ next: { kind: 'declined' }, counts: { completed_count: 2, in_flight_count: 1 } });
    const last = await recordLeaseStep(db, scope, { ...call, ids: mine.batch.slice(2) });
    expect(last?.next).toEqual({ kind: 'leased', batch: ids(9).slice(3, 6) });

    // Another lane holds the rest: nothing pending, so "none", and the cursor goes to the end.
    const other = await leaseBatch(db, scope, { operationId, owner: 'job-2', leaseSeconds: 300 });
    expect(other.batch).toEqual(ids(9).slice(6, 9));
    const none = await recordLeaseStep(db, scope, { ...call, ids: ids(9).slice(3, 6) });
    expect(none).toMatchObject({ next: { kind: 'none' }, counts: { remaining_count: 3, in_flight_count: 3 } });
    expect(none?.operation.state_json.cursor).toBe(9);

    // Items pending behind the cursor only (what a lease that rolled back behind another leaves):
    // the record stands, and the general lease finds them.
    const behind = await newOperation(6, 3);
    const first = await leaseBatch(db, behind.scope, {
      operationId: behind.operationId,
      owner: 'job-1',
      leaseSeconds: 300,
    });
    await db.query(`UPDATE assistant_operation SET state_json = jsonb_set(state_json, '{cursor}', '6') WHERE id = $1`, [
      behind.operationId,
    ]);
    const declined = await recordLeaseStep(db, behind.scope, {
      ...call,
      operationId: behind.operationId,
      ids: first.batch,
    });
    expect(declined).toMatchObject({ next: { kind: 'declined' }, counts: { completed_count: 3, in_flight_count: 0 } });
    const found = await leaseBatch(db, behind.scope, {
      operationId: behind.operationId,
      owner: 'job-1',
      leaseSeconds: 300,
    });
    expect(found.batch).toEqual(ids(6).slice(3, 6));
  });

  it('declines a record the one-statement record would decline, leasing nothing', async () => {
    const { scope, operationId } = await newOperation(8, 2);
    const mine = await leaseBatch(db, scope, { operationId, owner: 'mine', leaseSeconds: 300 });
    const theirs = await leaseBatch(db, scope, { operationId, owner: 'theirs', leaseSeconds: 300 });
    const before = await itemRows(operationId);
    const report = { operationId, owner: 'mine', reasons: null, leaseSeconds: 300 };
    expect(await recordLeaseStep(db, scope, { ...report, ids: [...mine.batch, theirs.batch[0] as string] })).toBeNull();
    expect(
      await recordLeaseStep(db, { ...scope, conversationId: randomUUID() }, { ...report, ids: mine.batch }),
    ).toBeNull();
    expect(await itemRows(operationId)).toEqual(before);
    const breaker = await newOperation(6, 3, { maxFailureRate: 0.5 });
    const lease = await leaseBatch(db, breaker.scope, {
      operationId: breaker.operationId,
      owner: 'w',
      leaseSeconds: 300,
    });
    expect(
      await recordLeaseStep(db, breaker.scope, {
        ...report,
        operationId: breaker.operationId,
        owner: 'w',
        ids: lease.batch,
      }),
    ).toBeNull();
    // Through recordResults: the general record, and no lease (the caller leases on its own).
    const general = await recordResults(db, scope, {
      operationId,
      completedIds: [...mine.batch, theirs.batch[0] as string],
      failed: [],
      owner: 'mine',
      leaseNext: { leaseSeconds: 300 },
    });
    expect(general.next).toBeUndefined();
    expect(general.leaseConflicts).toEqual([theirs.batch[0]]);
  });

  it('plans each statement of the step functions once per connection, and leaves the session setting alone', async () => {
    const configs = await db.query<{ proname: string; proconfig: string[] | null }>(
      `SELECT proname, proconfig FROM pg_proc
       WHERE proname IN ('opspad_lease_step', 'opspad_record_step', 'opspad_record_lease_step') ORDER BY proname`,
    );
    expect(configs).toEqual(
      ['opspad_lease_step', 'opspad_record_lease_step', 'opspad_record_step'].map((proname) => ({
        proname,
        proconfig: ['plan_cache_mode=force_generic_plan'],
      })),
    );
    const { scope, operationId } = await newOperation(4, 2);
    const seen = await db.transaction(async (tx) => {
      const lease = await leaseStep(tx, scope, { operationId, owner: 'w', leaseSeconds: 300 });
      const after = await tx.query<{ plan_cache_mode: string }>('SHOW plan_cache_mode');
      return { batch: lease?.batch, mode: after[0]?.plan_cache_mode };
    });
    expect(seen).toEqual({ batch: ids(4).slice(0, 2), mode: 'auto' });
  });

  it('leaves an operation with a circuit breaker to the general path, which keeps its window', async () => {
    const { scope, operationId } = await newOperation(6, 3, { maxFailureRate: 0.5 });
    const lease = await leaseBatch(db, scope, { operationId, owner: 'w', leaseSeconds: 300 });
    expect(await recordStep(db, scope, { operationId, owner: 'w', ids: lease.batch, reasons: null })).toBeNull();
    const recorded = await recordResults(db, scope, { operationId, completedIds: lease.batch, failed: [], owner: 'w' });
    expect(recorded.operation.state_json.recent_outcomes).toBe('ccc');
  });
});
