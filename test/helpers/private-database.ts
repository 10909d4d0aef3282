/**
 * A migrated Postgres database of a test file's own, next to the run's. For tests whose child
 * processes run reconcilers: a reconciler adopts every active background operation in its
 * database, so on the run's shared database it would take other files' operations into its own
 * queues and run them with its own handlers.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { inject } from 'vitest';
import { createPostgresDatabase, runMigrations } from '../../src/store/index.ts';

export interface PrivateDatabase {
  url: string;
  drop(): Promise<void>;
}

export async function privatePostgresDatabase(tag: string): Promise<PrivateDatabase> {
  const url = new URL(inject('databaseUrl'));
  const name = `opspad_test_${tag}_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: url.toString() });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  url.pathname = `/${name}`;
  const db = createPostgresDatabase({ connectionString: url.toString(), poolSize: 1 });
  await runMigrations(db);
  await db.close();
  return {
    url: url.toString(),
    async drop() {
      const dropper = new pg.Client({ connectionString: inject('databaseUrl') });
      await dropper.connect();
      try {
        await dropper.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await dropper.end();
      }
    },
  };
}
