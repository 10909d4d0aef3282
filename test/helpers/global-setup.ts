/**
 * Once per test run: a migrated Postgres database and a BullMQ key prefix of the run's own, so
 * runs never collide with each other or with a developer's data. Each test file works on a copy
 * of that database under a prefix of its own (test/helpers/file-database.ts). All are removed at
 * the end.
 *
 * The server comes from OPSPAD_TEST_DATABASE_URL, else DATABASE_URL, else the local default;
 * the run's database is created next to whatever database that URL names.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { createPostgresDatabase, runMigrations } from '../../src/store/index.ts';
import { deleteQueueKeys } from './redis.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    /** The server's maintenance database: where databases are created and dropped. */
    serverUrl: string;
    /** The run's migrated database, which each test file copies; nothing connects to it. */
    templateDatabase: string;
    redisUrl: string;
    queuePrefix: string;
  }
}

const DEFAULT_SERVER_URL = 'postgres://postgres@127.0.0.1:5432/postgres';

export default async function setup(project: TestProject) {
  const serverUrl = process.env.OPSPAD_TEST_DATABASE_URL ?? process.env.DATABASE_URL ?? DEFAULT_SERVER_URL;
  const runId = randomBytes(4).toString('hex');
  const databaseName = `opspad_test_${runId}`;
  const admin = new pg.Client({ connectionString: serverUrl });
  try {
    await admin.connect();
  } catch (error) {
    throw new Error(
      `The tests need a Postgres server at ${new URL(serverUrl).host} (set OPSPAD_TEST_DATABASE_URL to use another): ${(error as Error).message}`,
    );
  }
  await admin.query(`CREATE DATABASE ${databaseName}`);
  const url = new URL(serverUrl);
  url.pathname = `/${databaseName}`;

  const db = createPostgresDatabase({ connectionString: url.toString(), poolSize: 1 });
  await runMigrations(db);
  await db.close();

  const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
  const queuePrefix = `opspad-test-${runId}`;
  project.provide('serverUrl', serverUrl);
  project.provide('templateDatabase', databaseName);
  project.provide('redisUrl', redisUrl);
  project.provide('queuePrefix', queuePrefix);

  return async () => {
    // The files' copies (a file whose worker was killed leaves its copy behind), then the run's.
    const { rows } = await admin.query<{ datname: string }>(
      'SELECT datname FROM pg_database WHERE starts_with(datname, $1)',
      [`${databaseName}_`],
    );
    for (const { datname } of rows) {
      await admin.query(`DROP DATABASE IF EXISTS ${datname} WITH (FORCE)`);
    }
    await admin.query(`DROP DATABASE IF EXISTS ${databaseName} WITH (FORCE)`);
    // Roles a file made for itself under the run's name (start-failures.test.ts), if it was killed.
    const roles = await admin.query<{ rolname: string }>(
      'SELECT rolname FROM pg_roles WHERE starts_with(rolname, $1)',
      [`${databaseName}_`],
    );
    for (const { rolname } of roles.rows) {
      await admin.query(`DROP ROLE IF EXISTS ${rolname}`);
    }
    await admin.end();
    await deleteQueueKeys(queuePrefix, redisUrl);
  };
}
