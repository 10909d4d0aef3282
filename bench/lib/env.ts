/**
 * A fresh database and a fresh BullMQ prefix for each run, removed at its end, so a run never
 * touches anyone's data (a developer's, the tests') and starts from the same empty state.
 */
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import pg from 'pg';
import { deleteKeysWithPrefix } from '../../test/helpers/redis-keys.ts';

const DEFAULT_SERVER_URL = 'postgres://postgres@127.0.0.1:5432/postgres';

export interface RunResources {
  runId: string;
  databaseUrl: string;
  databaseName: string;
  redisUrl: string;
  prefix: string;
  /** Drops the database and deletes every Redis key under the prefix. */
  release(): Promise<void>;
}

export async function acquireRunResources(env: NodeJS.ProcessEnv = process.env): Promise<RunResources> {
  const serverUrl = env.OPSPAD_BENCH_DATABASE_URL ?? env.DATABASE_URL ?? DEFAULT_SERVER_URL;
  const redisUrl = env.REDIS_URL ?? 'redis://127.0.0.1:6379';
  const runId = randomBytes(4).toString('hex');
  const databaseName = `opspad_bench_${runId}`;
  const admin = new pg.Client({ connectionString: serverUrl });
  try {
    await admin.connect();
  } catch (error) {
    throw new Error(
      `The benchmark needs a Postgres server at ${new URL(serverUrl).host} (set OPSPAD_BENCH_DATABASE_URL or DATABASE_URL): ${(error as Error).message}`,
    );
  }
  const ping = new Redis(redisUrl, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  ping.on('error', () => {});
  try {
    await ping.connect();
    await ping.ping();
  } catch (error) {
    await admin.end();
    throw new Error(`The benchmark needs Redis at ${redisUrl}: ${(error as Error).message}`);
  } finally {
    ping.disconnect();
  }
  await admin.query(`CREATE DATABASE ${databaseName}`);
  const url = new URL(serverUrl);
  url.pathname = `/${databaseName}`;
  const prefix = `opspad-bench-${runId}`;
  let released = false;
  return {
    runId,
    databaseUrl: url.toString(),
    databaseName,
    redisUrl,
    prefix,
    async release() {
      if (released) {
        return;
      }
      released = true;
      try {
        await admin.query(`DROP DATABASE IF EXISTS ${databaseName} WITH (FORCE)`);
      } finally {
        await admin.end();
        await deleteKeysWithPrefix(redisUrl, prefix);
      }
    },
  };
}
