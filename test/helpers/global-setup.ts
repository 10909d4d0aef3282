/**
 * Once per test run: a Postgres database and a BullMQ key prefix of the run's own, so runs never
 * collide with each other or with a developer's data. Both are removed at the end.
 *
 * The server comes from OPSPAD_TEST_DATABASE_URL, else DATABASE_URL, else the local default;
 * the run's database is created next to whatever database that URL names.
 */
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { createPostgresDatabase, runMigrations } from '../../src/store/index.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    databaseUrl: string;
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
  const databaseUrl = url.toString();

  const db = createPostgresDatabase({ connectionString: databaseUrl, poolSize: 1 });
  await runMigrations(db);
  await db.close();

  const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
  const queuePrefix = `opspad-test-${runId}`;
  project.provide('databaseUrl', databaseUrl);
  project.provide('redisUrl', redisUrl);
  project.provide('queuePrefix', queuePrefix);

  return async () => {
    await admin.query(`DROP DATABASE IF EXISTS ${databaseName} WITH (FORCE)`);
    await admin.end();
    await deleteKeys(redisUrl, `${queuePrefix}*`);
  };
}

/** Removes every Redis key of this run (each harness prefixes its queues with the run's prefix). */
async function deleteKeys(redisUrl: string, pattern: string): Promise<void> {
  const redis = new Redis(redisUrl);
  try {
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
      cursor = next;
      if (keys.length > 0) {
        await redis.del(...keys);
      }
    } while (cursor !== '0');
  } finally {
    redis.disconnect();
  }
}
