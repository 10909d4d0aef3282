/**
 * Upgrade tests: an empty database of the engine's (a Postgres database of its own, or a PGlite),
 * and a migrations folder that stops before a given migration, as an earlier opspad left it.
 */
import { randomUUID } from 'node:crypto';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, inject } from 'vitest';
import { LIST_FUNCTIONS_SQL, sqlFunctionFiles } from '../../src/store/db/sql-functions.ts';
import {
  createPgliteDatabase,
  createPostgresDatabase,
  MIGRATIONS_FOLDER,
  type OpspadDatabase,
} from '../../src/store/index.ts';
import { adminClient, databaseUrlNamed } from './file-database.ts';
import type { Engine } from './harness.ts';

/** A migrations folder holding opspad's migrations before the one whose tag matches `upgrade`. */
export function migrationsBefore(upgrade: RegExp): string {
  const journal = JSON.parse(readFileSync(join(MIGRATIONS_FOLDER, 'meta/_journal.json'), 'utf8')) as {
    entries: { tag: string }[];
  };
  const index = journal.entries.findIndex((entry) => upgrade.test(entry.tag));
  expect(index, `${upgrade} is in the journal`).toBeGreaterThan(0);
  const entries = journal.entries.slice(0, index);
  const folder = mkdtempSync(join(tmpdir(), 'opspad-migrations-'));
  mkdirSync(join(folder, 'meta'));
  writeFileSync(join(folder, 'meta/_journal.json'), JSON.stringify({ ...journal, entries }));
  for (const { tag } of entries) {
    copyFileSync(join(MIGRATIONS_FOLDER, `${tag}.sql`), join(folder, `${tag}.sql`));
  }
  return folder;
}

export async function openEmptyDatabase(engine: Engine): Promise<{ db: OpspadDatabase; drop: () => Promise<void> }> {
  if (engine === 'pglite') {
    const db = await createPgliteDatabase();
    return { db, drop: () => db.close() };
  }
  const name = `${inject('templateDatabase')}_upgrade_${randomUUID().slice(0, 8)}`;
  const admin = await adminClient();
  await admin.query(`CREATE DATABASE ${name}`);
  const db = createPostgresDatabase({ connectionString: databaseUrlNamed(name), poolSize: 2 });
  return {
    db,
    drop: async () => {
      await db.close();
      await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await admin.end();
    },
  };
}

/**
 * Runs `seed` (today's store functions, writing the rows an earlier opspad would have) on a
 * database migrated only up to an earlier migration. Today's create counts the items in the
 * storage quota, whose table a later migration makes, asks the approval rule, whose column a later
 * migration makes, and is a call of server-side functions (src/store/operations/sql/) an earlier
 * opspad did not have: the seed is lent a bare copy of the table, the column and the functions
 * the database lacks, all taken away again before the caller upgrades, so the upgrade meets the
 * schema the earlier opspad left (and fills the quota from the operations it finds).
 */
export async function seedBeforeUpgrade<T>(db: OpspadDatabase, seed: () => Promise<T>): Promise<T> {
  const have = new Set((await db.query<{ name: string }>(LIST_FUNCTIONS_SQL)).map((row) => row.name));
  const lent = sqlFunctionFiles().filter((file) => !have.has(file.name));
  const [approvals] = await db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM information_schema.columns
     WHERE table_name = 'organization' AND column_name = 'approve_above'`,
  );
  const lendApprovals = approvals?.n === 0;
  await db.transaction(async (tx) => {
    await tx.query(
      `CREATE TABLE organization_quota (organization_id uuid PRIMARY KEY, stored_items bigint NOT NULL DEFAULT 0,
         max_stored_items bigint, max_open_operations integer)`,
    );
    if (lendApprovals) {
      await tx.query('ALTER TABLE organization ADD COLUMN approve_above integer');
    }
    // Bodies unchecked: a lent function may name what this earlier schema lacks and the seed never runs.
    await tx.query('SET LOCAL check_function_bodies = off');
    for (const file of lent) {
      await tx.query(file.text);
    }
  });
  try {
    return await seed();
  } finally {
    await db.transaction(async (tx) => {
      for (const { name } of lent) {
        await tx.query(`DROP FUNCTION ${name}`);
      }
      if (lendApprovals) {
        await tx.query('ALTER TABLE organization DROP COLUMN approve_above');
      }
      await tx.query('DROP TABLE organization_quota');
    });
  }
}
