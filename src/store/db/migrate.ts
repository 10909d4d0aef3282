/**
 * Applies the committed drizzle-kit migrations in drizzle/, then the server-side functions from
 * their files (sql-functions.ts), those that differ, in one transaction: the journal keeps the
 * history, the files the current text. A database a newer release has migrated keeps its
 * functions (sql-functions.ts mayApplyFunctions). On Postgres an advisory lock makes concurrent starts
 * (several API or worker processes) wait for one migrator instead of racing; it is a session
 * lock, so it runs on the direct connection when there is one.
 */
import { fileURLToPath } from 'node:url';
import type { PGlite } from '@electric-sql/pglite';
import { drizzle as drizzlePg } from 'drizzle-orm/node-postgres';
import { migrate as migratePg } from 'drizzle-orm/node-postgres/migrator';
import type pg from 'pg';
import type { Database } from './db.ts';
import { SESSION_LOCK } from './lock-keys.ts';
import {
  functionsToApply,
  LIST_FUNCTIONS_SQL,
  mayApplyFunctions,
  NEWEST_APPLIED_MIGRATION_SQL,
} from './sql-functions.ts';

export const MIGRATIONS_FOLDER = fileURLToPath(new URL('../../../drizzle', import.meta.url));

/**
 * Applies every migration of `migrationsFolder` (by default opspad's own) not applied yet, and
 * with opspad's own folder the function files. Tests pass a folder holding only the first
 * migrations, to build a database as an earlier opspad left it (without today's functions) and
 * then upgrade it.
 */
export async function runMigrations(
  db: Database & ({ pool: pg.Pool; sessionPool?: pg.Pool } | { pglite: PGlite }),
  { migrationsFolder = MIGRATIONS_FOLDER }: { migrationsFolder?: string } = {},
): Promise<void> {
  if ('pglite' in db) {
    // Imported here: drizzle's PGlite driver loads the embedded engine, which a process on
    // Postgres never needs (see createPgliteDatabase).
    const [{ drizzle: drizzlePglite }, { migrate: migratePglite }] = await Promise.all([
      import('drizzle-orm/pglite'),
      import('drizzle-orm/pglite/migrator'),
    ]);
    await migratePglite(drizzlePglite({ client: db.pglite }), { migrationsFolder });
    if (migrationsFolder === MIGRATIONS_FOLDER) {
      const newest = await db.pglite.query<{ newest: number | null }>(NEWEST_APPLIED_MIGRATION_SQL);
      const { rows } = await db.pglite.query<{ name: string; definition: string }>(LIST_FUNCTIONS_SQL);
      const stale = mayApplyFunctions(newest.rows[0]?.newest ?? null, migrationsFolder) ? functionsToApply(rows) : [];
      if (stale.length > 0) {
        await db.pglite.transaction(async (tx) => {
          for (const file of stale) {
            await tx.exec(file.text);
          }
        });
      }
    }
    return;
  }
  // The lock is a session's, and so is the migration: on the direct connection when the pool
  // goes through a transaction pooler (DATABASE_DIRECT_URL).
  const client = await (db.sessionPool ?? db.pool).connect();
  // A connection lost mid-migration fails the migration below; it must not crash the process.
  const onError = () => {};
  client.on('error', onError);
  try {
    await client.query('SELECT pg_advisory_lock($1)', [SESSION_LOCK.migration]);
    try {
      await migratePg(drizzlePg({ client }), { migrationsFolder });
      if (migrationsFolder === MIGRATIONS_FOLDER) {
        await applyFunctions(client);
      }
    } finally {
      await client.query('SELECT pg_advisory_unlock($1)', [SESSION_LOCK.migration]);
    }
  } finally {
    client.off('error', onError);
    client.release();
  }
}

/** The functions step on Postgres: the stale function files, in one transaction. */
async function applyFunctions(client: pg.PoolClient): Promise<void> {
  const newest = await client.query<{ newest: number | null }>(NEWEST_APPLIED_MIGRATION_SQL);
  if (!mayApplyFunctions(newest.rows[0]?.newest ?? null, MIGRATIONS_FOLDER)) {
    return;
  }
  const { rows } = await client.query<{ name: string; definition: string }>(LIST_FUNCTIONS_SQL);
  const stale = functionsToApply(rows);
  if (stale.length === 0) {
    return;
  }
  await client.query('BEGIN');
  try {
    for (const file of stale) {
      await client.query(file.text);
    }
    await client.query('COMMIT');
  } catch (error) {
    await client.query('ROLLBACK').catch(() => {});
    throw error;
  }
}
