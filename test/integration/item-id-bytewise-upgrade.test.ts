/**
 * The upgrade that makes item ids compare byte by byte (drizzle/NNNN_item_id_bytewise), on real
 * Postgres and on PGlite: a database at the migration before it holds an operation whose ids
 * differ only in case or in Unicode normalization. After the upgrade both id columns and the
 * unique id index are "C", the ids' statistics are there, every id is still its own item, a
 * report by id records exactly the items it names, and a repeated id is still refused.
 */
import { randomUUID } from 'node:crypto';
import { rmSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createApiKey,
  createOperation,
  type OpspadDatabase,
  recordResults,
  runMigrations,
} from '../../src/store/index.ts';
import { ENGINES } from '../helpers/harness.ts';
import { migrationsBefore, openEmptyDatabase, seedBeforeUpgrade } from '../helpers/upgrade.ts';

const UPGRADE = /^\d{4}_item_id_bytewise$/;
/** Equal under no deterministic collation: case, and é precomposed against e + combining accent. */
const IDS = ['a', 'A', '\u00e9', 'e\u0301', 'Straße', 'STRASSE'];

describe.each(ENGINES)('upgrading to item ids compared byte by byte on %s', (engine) => {
  let db: OpspadDatabase;
  let drop: () => Promise<void>;
  let folder: string;
  let scope: { organizationId: string; conversationId: string };
  let operationId: string;

  const create = (itemIds: string[], conversationId: string = randomUUID()) =>
    createOperation(
      db,
      { ...scope, conversationId },
      {
        operationType: 'send_sms',
        itemIds,
        batchSize: 10,
        queryParams: null,
        notes: null,
        execution: 'assistant',
        actor: 'test',
      },
    );

  beforeAll(async () => {
    ({ db, drop } = await openEmptyDatabase(engine));
    folder = migrationsBefore(UPGRADE);
    await runMigrations(db, { migrationsFolder: folder });
    const { organization_id } = await createApiKey(db, `org-${randomUUID()}`);
    scope = { organizationId: organization_id, conversationId: randomUUID() };
    operationId = await seedBeforeUpgrade(db, async () => (await create(IDS, scope.conversationId)).operation.id);
    // As a server's tables are: analyzed before the upgrade.
    await db.query('ANALYZE assistant_operation_item');
    await runMigrations(db);
  });
  afterAll(async () => {
    rmSync(folder, { recursive: true, force: true });
    await drop?.();
  });

  it('sets "C" on both id columns and on the unique id index', async () => {
    const columns = await db.query<{ table: string; collation: string }>(
      `SELECT a.attrelid::regclass::text AS table, c.collname AS collation
       FROM pg_attribute a JOIN pg_collation c ON c.oid = a.attcollation
       WHERE a.attname = 'item_id'
         AND a.attrelid IN ('assistant_operation_item'::regclass, 'assistant_operation_kept_failure'::regclass)
       ORDER BY 1`,
    );
    expect(columns).toEqual([
      { table: 'assistant_operation_item', collation: 'C' },
      { table: 'assistant_operation_kept_failure', collation: 'C' },
    ]);
    const [index] = await db.query<{ unique: boolean; collation: string }>(
      `SELECT i.indisunique AS unique, c.collname AS collation
       FROM pg_index i JOIN pg_collation c ON c.oid = i.indcollation[1]
       WHERE i.indexrelid = 'uq_assistant_operation_item_id'::regclass`,
    );
    expect(index).toEqual({ unique: true, collation: 'C' });
  });

  it("leaves the planner statistics of the item table's ids in place", async () => {
    // The collation change drops the column's statistics; the planner would then guess how
    // many rows an `item_id = ANY(…)` matches and could walk a whole operation instead.
    const [stats] = await db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_stats
       WHERE tablename = 'assistant_operation_item' AND attname = 'item_id'`,
    );
    expect(stats?.n).toBe(1);
  });

  it('keeps every id its own item and records exactly the ids a report names', async () => {
    const recorded = await recordResults(db, scope, {
      operationId,
      completedIds: ['A', 'e\u0301'],
      failed: [{ id: 'STRASSE', reason: 'no such street' }],
      owner: 'test',
    });
    expect(recorded.leaseConflicts).toEqual([]);
    const rows = await db.query<{ item_id: string; status: string }>(
      'SELECT item_id, status FROM assistant_operation_item WHERE operation_id = $1 ORDER BY ordinal',
      [operationId],
    );
    expect(rows).toEqual([
      { item_id: 'a', status: 'pending' },
      { item_id: 'A', status: 'completed' },
      { item_id: '\u00e9', status: 'pending' },
      { item_id: 'e\u0301', status: 'completed' },
      { item_id: 'Straße', status: 'pending' },
      { item_id: 'STRASSE', status: 'failed' },
    ]);
  });

  it('still refuses an id given twice and still takes ids that differ only in case', async () => {
    await expect(create(['x', 'y', 'x'])).rejects.toThrow(/uq_assistant_operation_item_id/);
    const { operation } = await create(['x', 'X']);
    expect(operation.total_items).toBe(2);
  });
});
