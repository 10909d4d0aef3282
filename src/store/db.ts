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
import type { PGlite } from '@electric-sql/pglite';
import pg from 'pg';
import { from as copyFrom } from 'pg-copy-streams';

export type Row = Record<string, unknown>;

export interface Queryable {
  query<R extends object = Row>(text: string, params?: readonly unknown[]): Promise<R[]>;
}

export interface Transaction extends Queryable {
  /**
   * Streams text-format COPY data into `table`, or is null when the engine has no COPY FROM
   * STDIN (PGlite); callers then fall back to chunked INSERTs.
   */
  readonly copyIn: ((statement: string, chunks: Iterable<string>) => Promise<void>) | null;
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

const RETRYABLE_SQLSTATES = new Set(['40P01', '40001']);
const MAX_TRANSACTION_ATTEMPTS = 3;

function isRetryable(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && RETRYABLE_SQLSTATES.has(code);
}

async function withRetries<T>(run: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await run();
    } catch (error) {
      if (attempt >= MAX_TRANSACTION_ATTEMPTS || !isRetryable(error)) {
        throw error;
      }
    }
  }
}

export interface PostgresOptions {
  connectionString: string;
  poolSize?: number;
  applicationName?: string;
}

/** A pooled connection to a real Postgres server. */
export function createPostgresDatabase(options: PostgresOptions): Database & { pool: pg.Pool } {
  const pool = new pg.Pool({
    connectionString: options.connectionString,
    max: options.poolSize ?? 10,
    application_name: options.applicationName ?? 'opspad',
    // A process that stops mid-transaction (frozen, paused by the OS, partitioned) would hold
    // its row locks forever and stall every worker of that operation; the server ends such a
    // session instead. opspad's transactions never sit idle for anywhere near this long.
    idle_in_transaction_session_timeout: 15_000,
  });
  // An idle client losing its connection (a server restart) must not crash the process; the
  // pool drops it and the next query opens a new one.
  pool.on('error', () => {});

  /**
   * A pooled client for work that spans several statements. A checked-out client whose server
   * connection dies (a restart, `pg_terminate_backend`) emits 'error'; unheard, that event would
   * crash the process. It is heard here, and the client is destroyed on release instead of reused.
   */
  const checkout = async () => {
    const client = await pool.connect();
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

  const run = async <R extends object>(client: pg.Pool | pg.PoolClient, text: string, params?: readonly unknown[]) =>
    (await client.query<R & pg.QueryResultRow>(text, params as unknown[] | undefined)).rows as R[];

  return {
    engine: 'postgres',
    pool,
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
      const { client, release } = await checkout();
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
    close: () => pool.end(),
  };
}

/**
 * An embedded PGlite database: in memory when `dataDir` is undefined, otherwise persisted in
 * that folder. PGlite is a single session; it queues queries behind open transactions.
 */
export async function createPgliteDatabase(dataDir?: string): Promise<Database & { pglite: PGlite }> {
  if (dataDir !== undefined) {
    mkdirSync(dataDir, { recursive: true });
  }
  // Loaded only here: a process on Postgres (every worker) never pays for the embedded engine's
  // module, about 40 MB of RSS once compiled (npm run bench, worker_peak_rss_mb).
  const { PGlite } = await import('@electric-sql/pglite');
  const pglite = await PGlite.create(dataDir);
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
    close: () => pglite.close(),
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
  OPSPAD_DATA_DIR: string;
  OPSPAD_PG_POOL_SIZE: number;
}): Promise<OpspadDatabase> {
  if (config.DATABASE_URL) {
    return createPostgresDatabase({ connectionString: config.DATABASE_URL, poolSize: config.OPSPAD_PG_POOL_SIZE });
  }
  return createPgliteDatabase(join(config.OPSPAD_DATA_DIR, 'pglite'));
}
