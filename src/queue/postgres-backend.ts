/**
 * The Postgres backend: BullMQ's PostgreSQL backend in a schema of its own, on the server in
 * DATABASE_URL or in the embedded PGlite (through {@link createPglitePool}), so opspad needs no
 * Redis at all.
 *
 * One connection per process, shared by every queue and worker: BullMQ's own factory opens a
 * pool and a LISTEN connection per queue and per worker (about 35 connections for one process
 * with four handler types), where this one opens one pool (OPSPAD_PG_POOL_SIZE, opened on
 * demand) and one LISTEN connection, which the workers and the control channel share.
 *
 * Migrations are explicit: BullMQ's (under its own transaction-scoped advisory lock, so many
 * processes starting at once migrate once) and the request counter's table, at start and in
 * `opspad migrate`.
 */
import type { EventEmitter } from 'node:events';
import type { PGlite } from '@electric-sql/pglite';
import {
  type BackendFactory,
  PostgresQueueBackend as BullmqPostgresBackend,
  type PgPool,
  PostgresConnection,
  type PostgresConnectionOptions,
  Queue,
  runMigrations as runBullmqMigrations,
  Worker,
} from 'bullmq';
import { IDLE_IN_TRANSACTION_MS } from '../store/db/db.ts';
import { SESSION_LOCK } from '../store/db/lock-keys.ts';
import { pgConnectionConfig } from '../store/db/primary-locator.ts';
import type { QueueBackend } from './backend.ts';
import { batchQueueName } from './catalog.ts';
import { type NotificationClient, postgresControlChannel } from './control-channel.ts';
import { fairShareTablesDdl, postgresFairShareStore, registeredWorkers } from './fair-share-postgres.ts';
import { keyLimitTablesDdl, postgresKeyLimitStore } from './key-limits-postgres.ts';
import { createPglitePool } from './pglite-pool.ts';
import { counterTablesDdl, postgresCappedLeases, postgresWindowCounter, type SqlRunner } from './postgres-counters.ts';
import { EMBEDDED_QUEUE_SCHEMA, queueSchemaFor } from './queue-schema.ts';

export type PostgresQueueTarget =
  | { engine: 'postgres'; connectionString: string; prefix: string; poolSize: number }
  | { engine: 'pglite'; pglite: PGlite };

/**
 * A connection every queue and worker of the process uses. BullMQ's backends close their
 * connection when their queue or worker closes; shared, it must outlive them all, so their close
 * does nothing and the backend closes it last ({@link closeShared}).
 */
class SharedPostgresConnection extends PostgresConnection {
  override async close(): Promise<void> {}
  override async disconnect(): Promise<void> {}
  async closeShared(): Promise<void> {
    await super.close();
    // Connections the pool has let go may still hear from the server (a database dropped with
    // FORCE right after); nobody is listening for them any more, so their errors are dropped.
    this.removeAllListeners('error');
    this.on('error', () => {});
  }
}

function openConnection(target: PostgresQueueTarget, pglitePool: PgPool | null) {
  if (target.engine === 'pglite') {
    return { schema: EMBEDDED_QUEUE_SCHEMA, connection: new SharedPostgresConnection(pglitePool as PgPool) };
  }
  const schema = queueSchemaFor(target.prefix);
  const connection = new SharedPostgresConnection(queuePoolConfig(target));
  return { schema, connection };
}

/**
 * The queue pool's settings on a Postgres server. The fair share's, the key limits' and the
 * capped leases' transactions on this pool hold a queue-wide advisory lock: a process that stops
 * inside one (frozen, paused by the OS, partitioned) would hold that lock, and so stall every
 * worker of the queue, until it woke up. The server ends such a session after
 * `idleInTransactionMs`, as it does the store's. The pool goes to DATABASE_DIRECT_URL when there
 * is one; its search_path is a startup parameter too.
 */
export function queuePoolConfig(
  target: Extract<PostgresQueueTarget, { engine: 'postgres' }>,
  idleInTransactionMs = IDLE_IN_TRANSACTION_MS,
): Exclude<PostgresConnectionOptions, string | PgPool> & { schema: string } {
  const schema = queueSchemaFor(target.prefix);
  return {
    // A multi-host URL: the pool and the LISTEN connection find the primary (primary-locator.ts).
    ...pgConnectionConfig(target.connectionString),
    schema,
    max: target.poolSize,
    // Which deployment a connection serves, in pg_stat_activity (Postgres keeps 63 bytes).
    application_name: `opspad-queue:${schema}`.slice(0, 63),
    idle_in_transaction_session_timeout: idleInTransactionMs,
  };
}

/**
 * A pooled client for several statements. A checked-out client whose server connection dies (a
 * restart, `pg_terminate_backend`) emits 'error', which would crash the process unheard: it is
 * heard here, and such a client is destroyed on release instead of reused.
 */
async function checkout(pool: PgPool) {
  const client = await pool.connect();
  let lost: Error | undefined;
  const onError = (error: Error) => {
    lost = error;
  };
  client.on('error', onError);
  return {
    client,
    release(broken = false) {
      (client as unknown as EventEmitter).off('error', onError);
      client.release(broken || lost !== undefined);
    },
  };
}

/** Brings BullMQ's schema and opspad's tables beside it up to date (idempotent, safe to race). */
async function migrate(connection: PostgresConnection, schema: string): Promise<void> {
  const { client, release } = await checkout(connection.pool);
  try {
    await runBullmqMigrations(client, schema);
    await client.query('BEGIN');
    try {
      await client.query('SELECT pg_advisory_xact_lock($1)', [SESSION_LOCK.queueDdl]);
      for (const statement of [
        ...counterTablesDdl(schema),
        ...fairShareTablesDdl(schema),
        ...keyLimitTablesDdl(schema),
      ]) {
        await client.query(statement);
      }
      await client.query('COMMIT');
    } catch (error) {
      await client.query('ROLLBACK').catch(() => {});
      throw error;
    }
  } finally {
    release();
  }
}

export interface PostgresBackend extends QueueBackend {
  readonly kind: 'postgres';
  /** The schema BullMQ's tables are in. */
  readonly schema: string;
}

/**
 * Connects, migrates BullMQ's schema, and returns the backend. With `migrateOnly`, closes again
 * after migrating (`opspad migrate`).
 */
export async function createPostgresQueueBackend(target: PostgresQueueTarget): Promise<PostgresBackend> {
  const pglitePool = target.engine === 'pglite' ? await createPglitePool(target.pglite, EMBEDDED_QUEUE_SCHEMA) : null;
  const { schema, connection } = openConnection(target, pglitePool);
  // Every queue and worker listens to the shared connection's events (4 listeners each).
  connection.setMaxListeners(0);
  connection.on('error', () => {}); // reported by the queues and workers, which re-emit it
  try {
    await migrate(connection, schema);
  } catch (error) {
    await connection.closeShared().catch(() => {});
    await pglitePool?.end();
    throw error;
  }

  // BullMQ names the LISTEN connection after a worker's queue for getWorkers(); with one
  // connection for all workers the names would overwrite each other, so none is set, and
  // getWorkers() finds no worker (nor could it in PGlite, which has no other sessions): the
  // board lists the fair share's registrations instead (registeredWorkers).
  const factory: BackendFactory<BullmqPostgresBackend, PostgresConnectionOptions> = (name, opts) =>
    new BullmqPostgresBackend(connection, name, opts, true);
  const connectionOption = connection.pool as PostgresConnectionOptions;
  const query = (text: string, params?: readonly unknown[]) => connection.pool.query(text, params);
  const runner: SqlRunner = {
    query,
    async transaction(fn) {
      const { client, release } = await checkout(connection.pool);
      let broken: Error | undefined;
      try {
        await client.query('BEGIN');
        const result = await fn({ query: (text, params) => client.query(text, params) });
        await client.query('COMMIT');
        return result;
      } catch (error) {
        await client.query('ROLLBACK').catch((rollbackError: unknown) => {
          broken = rollbackError instanceof Error ? rollbackError : new Error(String(rollbackError));
        });
        throw error;
      } finally {
        // A client whose ROLLBACK failed is in an unknown state: destroyed, not reused.
        release(broken !== undefined);
      }
    },
  };

  return {
    kind: 'postgres',
    schema,
    namespace: schema,
    location:
      target.engine === 'pglite'
        ? `the embedded database, schema ${schema}`
        : `Postgres schema ${schema} of DATABASE_URL`,
    // opspad uses only the API both backends implement; one Queue and Worker type serves both.
    createQueue: (name, settings) =>
      new Queue(name, { ...settings, connection: connectionOption }, factory) as unknown as Queue,
    createWorker: (name, processor, settings) =>
      new Worker(name, processor, { ...settings, connection: connectionOption }, factory) as unknown as Worker,
    control: postgresControlChannel(
      {
        notify: async (channel, payload) => void (await query('SELECT pg_notify($1, $2)', [channel, payload])),
        listenClient: async () => (await connection.getListenClient()) as NotificationClient,
        onListenerLost(listener) {
          connection.on('listenerinvalidated', listener);
          return () => connection.off('listenerinvalidated', listener);
        },
      },
      schema,
    ),
    counter: postgresWindowCounter(runner, schema),
    leases: postgresCappedLeases(runner, schema),
    fairShare: (operationType) => postgresFairShareStore(runner, schema, batchQueueName(operationType)),
    keyLimits: (operationType) => postgresKeyLimitStore(runner, schema, batchQueueName(operationType)),
    registeredWorkers: (queueName) => registeredWorkers(runner, schema, queueName, Date.now()),
    readinessChecks: { queue: async () => void (await query('SELECT 1')) },
    async close() {
      await connection.closeShared();
      await pglitePool?.end();
    },
    force() {
      // pg has no synchronous teardown: the close starts now and is not waited for.
      void connection.closeShared().catch(() => {});
      void pglitePool?.end();
    },
  };
}
