/**
 * Applies the committed drizzle-kit migrations in drizzle/. On Postgres an advisory lock makes
 * concurrent starts (several API or worker processes) wait for one migrator instead of racing;
 * it is a session lock, so it runs on the direct connection when there is one.
 */
import { fileURLToPath } from 'node:url';
import type { PGlite } from '@electric-sql/pglite';
import { drizzle as drizzlePg } from 'drizzle-orm/node-postgres';
import { migrate as migratePg } from 'drizzle-orm/node-postgres/migrator';
import type pg from 'pg';
import type { Database } from './db.ts';

export const MIGRATIONS_FOLDER = fileURLToPath(new URL('../../../drizzle', import.meta.url));

/** An arbitrary constant: the advisory lock key opspad's migrator holds while it runs. */
const MIGRATION_LOCK_KEY = 7_303_140_001;

/**
 * Applies every migration of `migrationsFolder` (by default opspad's own) not applied yet. Tests
 * pass a folder holding only the first migrations, to build a database as an earlier opspad left
 * it and then upgrade it.
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
    return;
  }
  // The lock is a session's, and so is the migration: on the direct connection when the pool
  // goes through a transaction pooler (DATABASE_DIRECT_URL).
  const client = await (db.sessionPool ?? db.pool).connect();
  // A connection lost mid-migration fails the migration below; it must not crash the process.
  const onError = () => {};
  client.on('error', onError);
  try {
    await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK_KEY]);
    try {
      await migratePg(drizzlePg({ client }), { migrationsFolder });
    } finally {
      await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK_KEY]);
    }
  } finally {
    client.off('error', onError);
    client.release();
  }
}
