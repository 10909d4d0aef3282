/**
 * One small interface over the two Postgres engines opspad runs on: a `pg` pool (production)
 * and an embedded PGlite (the zero-setup default and tests). Repositories write plain SQL with
 * `$n` parameters against {@link Queryable}; both engines accept the same SQL and parameter
 * shapes (arrays included). Numeric results are cast to `::int` in SQL, because the engines
 * parse int8 differently.
 */

import { once } from 'node:events';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { finished } from 'node:stream/promises';
import type { PGlite } from '@electric-sql/pglite';
import pg from 'pg';
import { from as copyFrom } from 'pg-copy-streams';
import { isRetryableConflict } from './pg-errors.ts';
import { preparedName } from './prepared.ts';
import { pgConnectionConfig } from './primary-locator.ts';
import { makePrivate, PRIVATE_FOLDER_MODE } from './private-files.ts';

export type Row = Record<string, unknown>;

export interface Queryable {
  query<R extends object = Row>(text: string, params?: readonly unknown[]): Promise<R[]>;
}

/** A COPY FROM STDIN in progress, written as its data arrives (see Transaction.openCopy). */
export interface CopyWriter {
  /** Sends COPY data; resolves when the connection can take more (backpressure). */
  write(data: Uint8Array): Promise<void>;
  /** Ends the COPY; rejects with the server's error (e.g. a unique violation) if it failed. */
  end(): Promise<void>;
  /** Abandons the COPY (CopyFail): the statement fails, and the transaction can roll back. */
  abort(): Promise<void>;
}

export interface Transaction extends Queryable {
  /**
   * Streams COPY data (in the statement's format) into `table`, or is null when the engine has
   * no COPY FROM STDIN (PGlite); callers then fall back to chunked INSERTs.
   */
  readonly copyIn: ((statement: string, chunks: Iterable<Uint8Array>) => Promise<void>) | null;
  /**
   * Starts a COPY FROM STDIN whose data the caller writes as it comes (a request body being
   * read), or is null when the engine has none (PGlite).
   */
  readonly openCopy?: ((statement: string) => CopyWriter) | null;
}

export interface Database extends Queryable {
  readonly engine: 'postgres' | 'pglite';
  /**
   * Runs `fn` in one transaction. A deadlock or serialization failure re-runs the whole
   * function (up to 3 times), so `fn` must not have effects outside the transaction.
   */
  transaction<T>(fn: (tx: Transaction) => Promise<T>): Promise<T>;
  /**
   * Runs `fn` only if no other process holds the advisory lock `key` (returns undefined then).
   * `fn` may use the database freely. On PGlite, one process owns the database: `fn` just runs.
   */
  withTryLock<T>(key: number, fn: () => Promise<T>): Promise<T | undefined>;
  close(): Promise<void>;
}

const MAX_TRANSACTION_ATTEMPTS = 3;

/**
 * Runs `run` again after a deadlock or serialization failure, up to 3 times in all: what
 * `transaction` does, and what a statement committed on its own needs too.
 */
export async function withRetries<T>(run: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await run();
    } catch (error) {
      if (attempt >= MAX_TRANSACTION_ATTEMPTS || !isRetryableConflict(error)) {
        throw error;
      }
    }
  }
}

/**
 * A COPY FROM STDIN on `client` that the caller writes piece by piece. The stream's error is
 * heard from the start (an unheard 'error' event would crash the process) and reported by the
 * next write or by end.
 */
function openCopyWriter(client: pg.PoolClient, statement: string): CopyWriter {
  const stream = client.query(copyFrom(statement));
  let failure: Error | undefined;
  stream.on('error', (error: Error) => {
    failure = error;
  });
  return {
    async write(data) {
      if (failure) {
        throw failure;
      }
      if (!stream.write(data)) {
        await once(stream, 'drain');
      }
    },
    async end() {
      if (failure) {
        throw failure;
      }
      stream.end();
      await once(stream, 'finish');
    },
    async abort() {
      if (!stream.destroyed) {
        stream.destroy(new Error('the COPY was abandoned: the request failed'));
      }
      await finished(stream).catch(() => {});
    },
  };
}

export interface PostgresOptions {
  connectionString: string;
  /**
   * A connection to the server itself, when `connectionString` goes through a pooler in
   * transaction mode (PgBouncer): what needs a session of its own — the migrations' lock and
   * the reconciler's — runs there, and the pooled connections send no startup parameter a
   * pooler refuses.
   */
  directConnectionString?: string;
  poolSize?: number;
  applicationName?: string;
}

/**
 * A server session ends a transaction left idle this long (see createPostgresDatabase; the
 * Postgres queue's pool sets it too).
 */
export const IDLE_IN_TRANSACTION_MS = 15_000;

/**
 * A pooled connection to a real Postgres server; `pool` serves queries and transactions,
 * `sessionPool` (the same pool, or one on the direct connection) the session advisory locks.
 */
export function createPostgresDatabase(options: PostgresOptions): Database & { pool: pg.Pool; sessionPool: pg.Pool } {
  const behindPooler = options.directConnectionString !== undefined;
  const pool = new pg.Pool({
    ...pgConnectionConfig(options.connectionString),
    max: options.poolSize ?? 10,
    application_name: options.applicationName ?? 'opspad',
    // A process that stops mid-transaction (frozen, paused by the OS, partitioned) would hold
    // its row locks forever and stall every worker of that operation; the server ends such a
    // session instead. opspad's transactions never sit idle for anywhere near this long.
    // A pooler refuses the startup parameter (PgBouncer: "unsupported startup parameter"): its
    // own idle_transaction_timeout does the same job there.
    ...(behindPooler ? {} : { idle_in_transaction_session_timeout: IDLE_IN_TRANSACTION_MS }),
  });
  // An idle client losing its connection (a server restart) must not crash the process; the
  // pool drops it and the next query opens a new one.
  pool.on('error', () => {});
  // Session locks hold a connection for as long as they are held: two are plenty (the
  // migrations' at start, the reconciler's), and the pooled connections stay for queries.
  const sessionPool = behindPooler
    ? new pg.Pool({
        ...pgConnectionConfig(options.directConnectionString as string),
        max: 2,
        application_name: options.applicationName ?? 'opspad',
        idle_in_transaction_session_timeout: IDLE_IN_TRANSACTION_MS,
      })
    : pool;
  sessionPool.on('error', () => {});

  /**
   * A pooled client for work that spans several statements. A checked-out client whose server
   * connection dies (a restart, `pg_terminate_backend`) emits 'error'; unheard, that event would
   * crash the process. It is heard here, and the client is destroyed on release instead of reused.
   */
  const checkout = async (from: pg.Pool = pool) => {
    const client = await from.connect();
    let lost: Error | undefined;
    const onError = (error: Error) => {
      lost = error;
    };
    client.on('error', onError);
    return {
      client,
      release(error?: Error) {
        client.off('error', onError);
        client.release(error ?? lost);
      },
    };
  };

  const run = async <R extends object>(client: pg.Pool | pg.PoolClient, text: string, params?: readonly unknown[]) => {
    const values = params as unknown[] | undefined;
    // Marked statements run by name, planned once per connection (prepared.ts); not through a pooler.
    const name = behindPooler ? undefined : preparedName(text);
    return (await client.query<R & pg.QueryResultRow>(name ? { name, text, values } : { text, values })).rows as R[];
  };

  return {
    engine: 'postgres',
    pool,
    sessionPool,
    query: (text, params) => run(pool, text, params),
    async transaction(fn) {
      return withRetries(async () => {
        const { client, release } = await checkout();
        let broken: Error | undefined;
        try {
          await client.query('BEGIN');
          const tx: Transaction = {
            query: (text, params) => run(client, text, params),
            async copyIn(statement, chunks) {
              const stream = client.query(copyFrom(statement));
              for (const chunk of chunks) {
                if (!stream.write(chunk)) {
                  await once(stream, 'drain');
                }
              }
              stream.end();
              await once(stream, 'finish');
            },
            openCopy: (statement) => openCopyWriter(client, statement),
          };
          const result = await fn(tx);
          await client.query('COMMIT');
          return result;
        } catch (error) {
          await client.query('ROLLBACK').catch((rollbackError: unknown) => {
            broken = rollbackError instanceof Error ? rollbackError : new Error(String(rollbackError));
          });
          throw error;
        } finally {
          // A client whose ROLLBACK failed is in an unknown state: destroy it, don't reuse it.
          release(broken);
        }
      });
    },
    async withTryLock(key, fn) {
      // A session lock: through a transaction pooler, on the direct connection (the pooler
      // would hand the lock's server session to other clients between statements).
      const { client, release } = await checkout(sessionPool);
      try {
        const rows = await client.query<{ locked: boolean }>('SELECT pg_try_advisory_lock($1) AS locked', [key]);
        if (!rows.rows[0]?.locked) {
          return undefined;
        }
        try {
          return await fn();
        } finally {
          await client.query('SELECT pg_advisory_unlock($1)', [key]);
        }
      } finally {
        release();
      }
    },
    close: async () => {
      await Promise.all([pool.end(), sessionPool === pool ? undefined : sessionPool.end()]);
    },
  };
}

/**
 * An embedded PGlite database: in memory when `dataDir` is undefined, otherwise persisted in
 * that folder. PGlite is a single session; it queues queries behind open transactions.
 */
export async function createPgliteDatabase(dataDir?: string): Promise<Database & { pglite: PGlite }> {
  if (dataDir !== undefined) {
    mkdirSync(dataDir, { recursive: true, mode: PRIVATE_FOLDER_MODE });
  }
  // Loaded only here: a process on Postgres (every worker) never pays for the embedded engine's
  // module, about 40 MB of RSS once compiled (npm run bench, worker_peak_rss_mb).
  const { PGlite } = await import('@electric-sql/pglite');
  const pglite = await PGlite.create(dataDir);
  const secure = () => (dataDir === undefined ? undefined : makePrivate(dataDir));
  secure();
  const run = async <R extends object>(target: Pick<PGlite, 'query'>, text: string, params?: readonly unknown[]) =>
    (await target.query<R>(text, params as unknown[] | undefined)).rows;

  return {
    engine: 'pglite',
    pglite,
    query: (text, params) => run(pglite, text, params),
    transaction: (fn) =>
      withRetries(() =>
        pglite.transaction((pgliteTx) => fn({ query: (text, params) => run(pgliteTx, text, params), copyIn: null })),
      ),
    withTryLock: (_key, fn) => fn(),
    close: async () => {
      await pglite.close();
      secure();
    },
  };
}

export type PostgresDatabase = Awaited<ReturnType<typeof createPostgresDatabase>>;
export type PgliteDatabase = Awaited<ReturnType<typeof createPgliteDatabase>>;
/** Either engine, with the handle its migrator needs. */
export type OpspadDatabase = PostgresDatabase | PgliteDatabase;

/**
 * Opens the database the configuration names: Postgres at `DATABASE_URL`, or the embedded
 * PGlite under `OPSPAD_DATA_DIR` when it is unset.
 */
export async function openDatabase(config: {
  DATABASE_URL?: string | undefined;
  DATABASE_DIRECT_URL?: string | undefined;
  OPSPAD_DATA_DIR: string;
  OPSPAD_PG_POOL_SIZE: number;
}): Promise<OpspadDatabase> {
  if (config.DATABASE_URL) {
    return createPostgresDatabase({
      connectionString: config.DATABASE_URL,
      ...(config.DATABASE_DIRECT_URL ? { directConnectionString: config.DATABASE_DIRECT_URL } : {}),
      poolSize: config.OPSPAD_PG_POOL_SIZE,
    });
  }
  return createPgliteDatabase(join(config.OPSPAD_DATA_DIR, 'pglite'));
}

/** Opens the configured database and connects: an unreachable server fails here, not in the migrations. */
export async function openConnectedDatabase(config: Parameters<typeof openDatabase>[0]): Promise<OpspadDatabase> {
  const db = await openDatabase(config);
  try {
    await db.query('SELECT 1');
    return db;
  } catch (error) {
    await db.close();
    throw error;
  }
}
