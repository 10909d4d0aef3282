/**
 * The upgrade that keeps a lease only in its lease row (drizzle/NNNN_item_written_once), on real
 * Postgres and on PGlite: a database at the migration before it holds an operation with a batch
 * leased the old way (its item rows 'leased', with owner and expiry, and attempts counted when
 * the lease was taken). After the upgrade the batch is still leased to the same owner, its
 * owner's report records it (attempts counting that lease once), and the next lease goes on
 * from the cursor. A lease row that still names items its owner gave back (the previous schema
 * never took them out) holds only the items still leased to it after the upgrade.
 */
import { rmSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { leaseBatch, type OpspadDatabase, recordResults, runMigrations } from '../../src/store/index.ts';
import { ENGINES, ids, newStoreOperation } from '../helpers/harness.ts';
import { ITEM_STATES } from '../helpers/item-states.ts';
import { migrationsBefore, openEmptyDatabase, seedBeforeUpgrade } from '../helpers/upgrade.ts';

const UPGRADE = /^\d{4}_item_written_once$/;

describe.each(ENGINES)('upgrading to leases kept only in their rows on %s', (engine) => {
  let db: OpspadDatabase;
  let drop: () => Promise<void>;
  let folder: string;
  let operation: Awaited<ReturnType<typeof newStoreOperation>>;
  let gaveBack: Awaited<ReturnType<typeof newStoreOperation>>;

  beforeAll(async () => {
    ({ db, drop } = await openEmptyDatabase(engine));
    folder = migrationsBefore(UPGRADE);
    await runMigrations(db, { migrationsFolder: folder });
    operation = await seedBeforeUpgrade(db, () => newStoreOperation(db, 6, 3));
    // The first batch, leased to `w` as the previous schema leased it.
    const { operationId } = operation;
    await db.query(
      `UPDATE assistant_operation_item SET status = 'leased', lease_owner = 'w',
         lease_expires_at = now() + interval '5 minutes', attempts = 1, updated_at = now()
       WHERE operation_id = $1 AND ordinal < 3`,
      [operationId],
    );
    await db.query(
      `INSERT INTO assistant_operation_lease (operation_id, owner, ordinals, remaining, expires_at)
       VALUES ($1, 'w', '{0,1,2}', 3, now() + interval '5 minutes')`,
      [operationId],
    );
    await db.query(`UPDATE assistant_operation SET state_json = jsonb_set(state_json, '{cursor}', '3') WHERE id = $1`, [
      operationId,
    ]);
    // Another operation: `w` leased items 0-2, gave back 1 and 2, and `v` leased 2; `w`'s row
    // still names all three, as the previous schema left it.
    gaveBack = await seedBeforeUpgrade(db, () => newStoreOperation(db, 6, 3));
    await db.query(
      `UPDATE assistant_operation_item SET status = 'leased', lease_owner = CASE WHEN ordinal = 0 THEN 'w' ELSE 'v' END,
         lease_expires_at = now() + interval '5 minutes', attempts = 1
       WHERE operation_id = $1 AND ordinal IN (0, 2)`,
      [gaveBack.operationId],
    );
    await db.query(
      `INSERT INTO assistant_operation_lease (operation_id, owner, ordinals, remaining, expires_at)
       VALUES ($1, 'w', '{0,1,2}', 1, now() + interval '5 minutes'), ($1, 'v', '{2}', 1, now() + interval '5 minutes')`,
      [gaveBack.operationId],
    );
    await runMigrations(db);
  });
  afterAll(async () => {
    rmSync(folder, { recursive: true, force: true });
    await drop?.();
  });

  it('keeps the batch leased to its owner, records it once and leases on from the cursor', async () => {
    const { scope, operationId } = operation;
    const states = () =>
      db.query<{ item_id: string; status: string; lease_owner: string | null; attempts: number }>(
        `SELECT item_id, status, lease_owner, attempts FROM (${ITEM_STATES}) i WHERE operation_id = $1 ORDER BY ordinal`,
        [operationId],
      );
    const first = ids(6).slice(0, 3);
    expect(await states()).toEqual(
      ids(6).map((item_id, i) =>
        i < 3
          ? { item_id, status: 'leased', lease_owner: 'w', attempts: 0 }
          : { item_id, status: 'pending', lease_owner: null, attempts: 0 },
      ),
    );
    // Another lane cannot take the leased batch; its owner's report records it.
    expect((await leaseBatch(db, scope, { operationId, owner: 'v', leaseSeconds: 300 })).batch).toEqual(
      ids(6).slice(3),
    );
    const recorded = await recordResults(db, scope, { operationId, completedIds: first, failed: [], owner: 'w' });
    expect(recorded.leaseConflicts).toEqual([]);
    expect((await states()).slice(0, 3)).toEqual(
      first.map((item_id) => ({ item_id, status: 'completed', lease_owner: null, attempts: 1 })),
    );
  });

  it('keeps in each lease row only the items still leased to its owner', async () => {
    const { operationId } = gaveBack;
    const states = await db.query<{ status: string; lease_owner: string | null }>(
      `SELECT status, lease_owner FROM (${ITEM_STATES}) i WHERE operation_id = $1 ORDER BY ordinal LIMIT 3`,
      [operationId],
    );
    expect(states).toEqual([
      { status: 'leased', lease_owner: 'w' },
      { status: 'pending', lease_owner: null },
      { status: 'leased', lease_owner: 'v' },
    ]);
    const leases = await db.query<{ owner: string; ordinals: number[]; remaining: number }>(
      'SELECT owner, ordinals, remaining FROM assistant_operation_lease WHERE operation_id = $1 ORDER BY owner',
      [operationId],
    );
    expect(leases).toEqual([
      { owner: 'v', ordinals: [2], remaining: 1 },
      { owner: 'w', ordinals: [0], remaining: 1 },
    ]);
  });
});
