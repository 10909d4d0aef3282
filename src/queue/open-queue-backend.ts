/**
 * Builds the process's {@link QueueBackend} from the configuration: Redis at REDIS_URL (or the
 * Redis Cluster of REDIS_CLUSTER_NODES), or
 * BullMQ's PostgreSQL backend on the database opspad already uses (the server in DATABASE_URL,
 * or the embedded PGlite instance itself, never a second one).
 */
import type { Config } from '../config/env.ts';
import type { OpspadDatabase } from '../store/index.ts';
import type { QueueBackend } from './backend.ts';
import { createPostgresQueueBackend, type PostgresQueueTarget } from './postgres-backend.ts';
import { createRedisQueueBackend } from './redis-backend.ts';
import { redisTargetOf } from './redis-target.ts';

type QueueConfig = Pick<
  Config,
  | 'OPSPAD_QUEUE_BACKEND'
  | 'REDIS_URL'
  | 'REDIS_CLUSTER_NODES'
  | 'DATABASE_URL'
  | 'DATABASE_DIRECT_URL'
  | 'OPSPAD_QUEUE_PREFIX'
  | 'OPSPAD_PG_POOL_SIZE'
>;

function postgresTarget(config: QueueConfig, db: OpspadDatabase): PostgresQueueTarget {
  if ('pglite' in db) {
    return { engine: 'pglite', pglite: db.pglite };
  }
  if (!config.DATABASE_URL) {
    throw new Error('The Postgres queue backend runs on the server in DATABASE_URL: set it.');
  }
  return {
    engine: 'postgres',
    // BullMQ's pool sets its search_path as a startup parameter and its workers LISTEN: neither
    // passes a transaction pooler, so the jobs go on the direct connection when there is one.
    connectionString: config.DATABASE_DIRECT_URL ?? config.DATABASE_URL,
    prefix: config.OPSPAD_QUEUE_PREFIX,
    poolSize: config.OPSPAD_PG_POOL_SIZE,
  };
}

/**
 * Connects the configured backend; on Postgres, also brings BullMQ's schema up to date. On
 * Redis, fails with what to do when Redis does not answer.
 */
export async function openQueueBackend(config: QueueConfig, db: OpspadDatabase): Promise<QueueBackend> {
  if (config.OPSPAD_QUEUE_BACKEND === 'redis') {
    return createRedisQueueBackend({ target: redisTargetOf(config), queuePrefix: config.OPSPAD_QUEUE_PREFIX });
  }
  return createPostgresQueueBackend(postgresTarget(config, db));
}

/**
 * `opspad migrate`: on the Postgres backend, BullMQ's schema beside opspad's tables; Redis has
 * nothing to migrate. Returns what was migrated, for the command's output.
 */
export async function migrateQueueBackend(config: QueueConfig, db: OpspadDatabase): Promise<string | undefined> {
  if (config.OPSPAD_QUEUE_BACKEND === 'redis') {
    return undefined;
  }
  const backend = await createPostgresQueueBackend(postgresTarget(config, db));
  await backend.close();
  return backend.location;
}
