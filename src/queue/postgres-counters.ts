/**
 * The request counters and capped leases of the Postgres queue backend: UNLOGGED tables in the
 * queue's schema.
 *
 * - Beside BullMQ's tables, not opspad's: they are dispatch state like the jobs, namespaced the
 *   way Redis namespaces them (two deployments on one database, two schemas, two counts).
 * - UNLOGGED: every authenticated request writes a counter, and a counter needs no WAL, no fsync
 *   and no replica. A crash empties the tables, which at worst forgives one window's requests
 *   (or frees the stream slots of streams the crash ended anyway).
 * - A counter is one row per key, moved to the current window by one `INSERT … ON CONFLICT …
 *   RETURNING`: concurrent hits of one key queue on its row lock, so each sees the count
 *   including its own, and a hit stamped with an older window (a clock behind the others)
 *   counts in the current one. Expired rows are deleted at most once a minute, by whichever
 *   request comes along.
 * - A lease is taken in one transaction that holds a lock on its key (so two processes never
 *   both take the last slot), by the database's clock.
 */
import { queueLockSubject } from '../store/db/lock-keys.ts';
import { quoteSchema } from './queue-schema.ts';

export interface SqlRunner {
  query(text: string, params?: readonly unknown[]): Promise<{ rows: Record<string, unknown>[] }>;
  /** Runs `fn` on one connection inside BEGIN … COMMIT (ROLLBACK when it throws). */
  transaction<T>(fn: (tx: Pick<SqlRunner, 'query'>) => Promise<T>): Promise<T>;
}

const SWEEP_EVERY_MS = 60_000;
/** The database's clock in epoch milliseconds. */
const NOW_MS = '(extract(epoch FROM clock_timestamp()) * 1000)::bigint';

/** DDL, run with the queue schema's migrations (idempotent). */
export function counterTablesDdl(schema: string): string[] {
  const s = quoteSchema(schema);
  return [
    `CREATE UNLOGGED TABLE IF NOT EXISTS ${s}.opspad_rate_window (
      key text PRIMARY KEY,
      window_index bigint NOT NULL,
      hits integer NOT NULL,
      expires_at_ms bigint NOT NULL
    )`,
    `CREATE UNLOGGED TABLE IF NOT EXISTS ${s}.opspad_lease (
      key text NOT NULL,
      member text NOT NULL,
      expires_at_ms bigint NOT NULL,
      PRIMARY KEY (key, member)
    )`,
  ];
}

export function postgresWindowCounter(runner: Pick<SqlRunner, 'query'>, schema: string) {
  const table = `${quoteSchema(schema)}.opspad_rate_window`;
  const upsert = `INSERT INTO ${table} AS w (key, window_index, hits, expires_at_ms) VALUES ($1, $2, 1, $3)
    ON CONFLICT (key) DO UPDATE SET
      hits = CASE WHEN EXCLUDED.window_index > w.window_index THEN 1 ELSE w.hits + 1 END,
      window_index = GREATEST(w.window_index, EXCLUDED.window_index),
      expires_at_ms = GREATEST(w.expires_at_ms, EXCLUDED.expires_at_ms)
    RETURNING hits`;
  let lastSweep = Date.now();
  return {
    async increment(key: string, window: number, ttlMs: number): Promise<number> {
      const now = Date.now();
      if (now - lastSweep > SWEEP_EVERY_MS) {
        lastSweep = now;
        // Not awaited: the request does not wait for the housekeeping, which may fail alone.
        runner.query(`DELETE FROM ${table} WHERE expires_at_ms < $1`, [now]).catch(() => {});
      }
      const { rows } = await runner.query(upsert, [key, window, now + ttlMs]);
      return Number(rows[0]?.hits ?? 0);
    },
    async read(key: string, window: number): Promise<number> {
      const { rows } = await runner.query(`SELECT hits FROM ${table} WHERE key = $1 AND window_index = $2`, [
        key,
        window,
      ]);
      return Number(rows[0]?.hits ?? 0);
    },
  };
}

export function postgresCappedLeases(runner: SqlRunner, schema: string) {
  const table = `${quoteSchema(schema)}.opspad_lease`;
  return {
    async acquire(key: string, member: string, leaseMs: number, cap: number): Promise<boolean> {
      return runner.transaction(async (tx) => {
        // One taker at a time per key (hashed into the lock space of this table's schema).
        await tx.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [
          queueLockSubject(schema, 'lease', key),
        ]);
        const { rows } = await tx.query(
          `WITH lapsed AS (DELETE FROM ${table} WHERE key = $1 AND expires_at_ms <= ${NOW_MS})
           SELECT count(*)::int AS live FROM ${table} WHERE key = $1 AND expires_at_ms > ${NOW_MS}`,
          [key],
        );
        if (Number(rows[0]?.live ?? 0) >= cap) {
          return false;
        }
        await tx.query(
          `INSERT INTO ${table} (key, member, expires_at_ms) VALUES ($1, $2, ${NOW_MS} + $3)
           ON CONFLICT (key, member) DO UPDATE SET expires_at_ms = EXCLUDED.expires_at_ms`,
          [key, member, leaseMs],
        );
        return true;
      });
    },
    async renew(key: string, member: string, leaseMs: number): Promise<void> {
      await runner.query(
        `UPDATE ${table} SET expires_at_ms = ${NOW_MS} + $3 WHERE key = $1 AND member = $2 AND expires_at_ms > ${NOW_MS}`,
        [key, member, leaseMs],
      );
    },
    async release(key: string, member: string): Promise<void> {
      await runner.query(`DELETE FROM ${table} WHERE key = $1 AND member = $2`, [key, member]);
    },
  };
}
