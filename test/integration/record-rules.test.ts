/**
 * The two record statements are one rule on the cases they share. The step functions record with
 * opspad_record_owned (every id a pending item of the caller's own live lease, or nothing); the
 * general path with item-sql.ts's statements (per id: pending and not held by another's live
 * lease). On a report of the caller's own leased items both must leave the same rows: statuses,
 * reasons, attempts, and the lease counted down.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { leaseBatch, type OpspadDatabase } from '../../src/store/index.ts';
import { lockItems, recordMixed } from '../../src/store/leases/item-sql.ts';
import { recordStep } from '../../src/store/leases/step-calls.ts';
import { ENGINES, newStoreOperation, openTestDatabase } from '../helpers/harness.ts';

describe.each(ENGINES)('the record rule on %s', (engine) => {
  let db: OpspadDatabase;

  beforeAll(async () => {
    db = await openTestDatabase(engine);
  });
  afterAll(async () => {
    await db.close();
  });

  async function leasedOperation() {
    const { scope, operationId } = await newStoreOperation(db, 10, 5);
    const lease = await leaseBatch(db, scope, { operationId, owner: 'w1', leaseSeconds: 300 });
    return { scope, operationId, batch: lease.batch };
  }

  async function state(operationId: string) {
    const items = await db.query(
      `SELECT ordinal, item_id, status, reason, attempts FROM assistant_operation_item
       WHERE operation_id = $1 ORDER BY ordinal`,
      [operationId],
    );
    const leases = await db.query(
      `SELECT owner, remaining FROM assistant_operation_lease WHERE operation_id = $1 AND remaining > 0
       ORDER BY owner`,
      [operationId],
    );
    return { items, leases };
  }

  it('leaves the same rows through the step and through the general statements', async () => {
    const step = await leasedOperation();
    const general = await leasedOperation();
    const [a, b, c] = step.batch as [string, string, string];
    expect(general.batch).toEqual(step.batch);

    const recorded = await recordStep(db, step.scope, {
      operationId: step.operationId,
      owner: 'w1',
      ids: [a, b, c],
      reasons: [null, 'carrier refused', null],
    });
    expect(recorded).not.toBeNull();
    await db.transaction(async (tx) => {
      await lockItems(tx, general.operationId, [a, c, b]);
      await recordMixed(tx, general.operationId, [a, c], [b], ['carrier refused'], 'w1');
    });

    const after = await state(step.operationId);
    expect(await state(general.operationId)).toEqual(after);
    expect(after.leases).toEqual([{ owner: 'w1', remaining: 2 }]);
    expect(after.items.slice(0, 3)).toMatchObject([
      { status: 'completed', reason: null, attempts: 1 },
      { status: 'failed', reason: 'carrier refused', attempts: 1 },
      { status: 'completed', reason: null, attempts: 1 },
    ]);
  });
});
