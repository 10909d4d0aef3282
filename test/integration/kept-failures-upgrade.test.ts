/**
 * The upgrade that moves retention's kept failures out of the item table
 * (drizzle/NNNN_kept_failures), on real Postgres and on PGlite: a database at the migration before
 * it holds a pruned operation (its kept failures still item rows), one pruned halfway and one not
 * pruned at all; after the upgrade the pruned rows are kept failures, the others untouched, and
 * every operation's failures read the same, in item order.
 */
import { randomUUID } from 'node:crypto';
import { rmSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type OpspadDatabase, runMigrations } from '../../src/store/index.ts';
import { failuresPage } from '../../src/store/operations/failure-sql.ts';
import { ENGINES } from '../helpers/harness.ts';
import { migrationsBefore, openEmptyDatabase } from '../helpers/upgrade.ts';

const UPGRADE = /^\d{4}_kept_failures$/;

interface Ops {
  pruned: string;
  halfway: string;
  unpruned: string;
}

/** Three finished operations of five items each, with failures at ordinals 1 and 3. */
async function fillPreviousSchema(db: OpspadDatabase): Promise<Ops> {
  const org = randomUUID();
  const conversation = randomUUID();
  const ops: Ops = { pruned: randomUUID(), halfway: randomUUID(), unpruned: randomUUID() };
  await db.query('INSERT INTO organization (id, name) VALUES ($1, $2)', [org, `kept-${org}`]);
  await db.query('INSERT INTO assistant_conversation (id, organization_id) VALUES ($1, $2)', [conversation, org]);
  const states = {
    pruned: { items_pruned_at: new Date().toISOString() },
    halfway: { items_pruned_through: 2 },
    unpruned: {},
  };
  for (const [name, id] of Object.entries(ops) as [keyof Ops, string][]) {
    await db.query(
      `INSERT INTO assistant_operation (id, conversation_id, organization_id, operation_type, status, total_items,
         completed_count, failed_count, state_json)
       VALUES ($1, $2, $3, 'manual', 'completed', 5, 3, 2, $4::jsonb)`,
      [id, conversation, org, JSON.stringify(states[name])],
    );
    // What retention left: a pruned operation its failures only; one pruned up to ordinal 2 its
    // failure below 2 and everything from 2 on.
    const rows = [0, 1, 2, 3, 4].filter((n) =>
      name === 'pruned' ? n % 2 === 1 : name === 'halfway' ? n >= 2 || n % 2 === 1 : true,
    );
    for (const n of rows) {
      const failed = n % 2 === 1;
      await db.query(
        `INSERT INTO assistant_operation_item (operation_id, ordinal, item_id, status, attempts, reason)
         VALUES ($1, $2, $3, $4, 1, $5)`,
        [id, n, `item-${n}`, failed ? 'failed' : 'completed', failed ? `reason ${n}` : null],
      );
    }
  }
  return ops;
}

describe.each(ENGINES)('upgrading to kept failures of their own on %s', (engine) => {
  let db: OpspadDatabase;
  let drop: () => Promise<void>;
  let ops: Ops;
  let folder: string;

  beforeAll(async () => {
    ({ db, drop } = await openEmptyDatabase(engine));
    folder = migrationsBefore(UPGRADE);
    await runMigrations(db, { migrationsFolder: folder });
    ops = await fillPreviousSchema(db);
    await runMigrations(db);
  });
  afterAll(async () => {
    rmSync(folder, { recursive: true, force: true });
    await drop?.();
  });

  it('moves the pruned failures to the kept ones and leaves the rest in the item table', async () => {
    const where = async (id: string) => ({
      items: (
        await db.query<{ ordinal: number }>(
          'SELECT ordinal FROM assistant_operation_item WHERE operation_id = $1 ORDER BY ordinal',
          [id],
        )
      ).map((r) => r.ordinal),
      kept: await db.query<{ ordinal: number; item_id: string; attempts: number; reason: string }>(
        'SELECT ordinal, item_id, attempts, reason FROM assistant_operation_kept_failure WHERE operation_id = $1 ORDER BY ordinal',
        [id],
      ),
    });
    const kept = (n: number) => ({ ordinal: n, item_id: `item-${n}`, attempts: 1, reason: `reason ${n}` });
    expect(await where(ops.pruned)).toEqual({ items: [], kept: [kept(1), kept(3)] });
    expect(await where(ops.halfway)).toEqual({ items: [2, 3, 4], kept: [kept(1)] });
    expect(await where(ops.unpruned)).toEqual({ items: [0, 1, 2, 3, 4], kept: [] });
  });

  it('reads every operation’s failures the same, in item order, wherever they are', async () => {
    for (const id of Object.values(ops)) {
      expect(await failuresPage(db, id, -1, 10)).toEqual([
        { ordinal: 1, item_id: 'item-1', reason: 'reason 1' },
        { ordinal: 3, item_id: 'item-3', reason: 'reason 3' },
      ]);
      expect(await failuresPage(db, id, 1, 10)).toEqual([{ ordinal: 3, item_id: 'item-3', reason: 'reason 3' }]);
    }
  });
});
