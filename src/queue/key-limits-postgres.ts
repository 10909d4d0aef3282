/**
 * The provider limits' state on the Postgres queue backend: UNLOGGED tables of the queue's
 * schema (token buckets, holds, parked jobs), rows per queue and limit key. A decision is one
 * transaction holding a lock on the key: it reads the bucket and the items held by live holds in
 * one statement, applies domain/key-limits.ts's `grantItems` (no second copy of the rule) and
 * writes the bucket and the hold (or, refused at the concurrency, the parked job) in one more.
 * UNLOGGED, as Redis without persistence: a crash fills every bucket and frees every hold, which
 * lets at most one burst through. Keys are tenants' choice, so each process sweeps what lapsed
 * (`sweep`) now and then.
 */
import { grantItems } from '../domain/key-limits.ts';
import { KEY_LIMIT_BOUNDS } from '../domain/limit-overrides.ts';
import { queueLockSubject } from '../store/db/lock-keys.ts';
import type { KeyLimitStore } from './key-limit-store.ts';
import type { SqlRunner } from './postgres-counters.ts';
import { quoteSchema } from './queue-schema.ts';

/** DDL, run with the queue schema's migrations (idempotent). */
export function keyLimitTablesDdl(schema: string): string[] {
  const s = quoteSchema(schema);
  return [
    `CREATE UNLOGGED TABLE IF NOT EXISTS ${s}.opspad_limit_bucket (
      queue text NOT NULL, key text NOT NULL, tokens double precision NOT NULL, at_ms bigint NOT NULL,
      PRIMARY KEY (queue, key)
    )`,
    `CREATE UNLOGGED TABLE IF NOT EXISTS ${s}.opspad_limit_hold (
      queue text NOT NULL, key text NOT NULL, member text NOT NULL, items integer NOT NULL, expires_at_ms bigint NOT NULL,
      PRIMARY KEY (queue, key, member)
    )`,
    `CREATE UNLOGGED TABLE IF NOT EXISTS ${s}.opspad_limit_parked (
      queue text NOT NULL, key text NOT NULL, job_id text NOT NULL, parked_at_ms bigint NOT NULL,
      PRIMARY KEY (queue, key, job_id)
    )`,
  ];
}

export function postgresKeyLimitStore(runner: SqlRunner, schema: string, queue: string): KeyLimitStore {
  const s = quoteSchema(schema);
  const t = {
    bucket: `${s}.opspad_limit_bucket`,
    hold: `${s}.opspad_limit_hold`,
    parked: `${s}.opspad_limit_parked`,
  };
  /**
   * Takes the longest-parked job of key $2 when member $3 holds the key (as the statement began:
   * its hold is what frees room), as a CTE named `popped`.
   */
  const popParked = `popped AS (
    DELETE FROM ${t.parked} WHERE queue = $1 AND key = $2 AND job_id IN (
      SELECT job_id FROM ${t.parked} WHERE queue = $1 AND key = $2
        AND EXISTS (SELECT 1 FROM ${t.hold} WHERE queue = $1 AND key = $2 AND member = $3)
      ORDER BY parked_at_ms, job_id LIMIT 1 FOR UPDATE SKIP LOCKED
    ) RETURNING job_id)`;
  const lock = (tx: Pick<SqlRunner, 'query'>, key: string) =>
    tx.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [
      queueLockSubject(schema, 'limit', `${queue}:${key}`),
    ]);

  return {
    acquire(request) {
      return runner.transaction(async (tx) => {
        await lock(tx, request.key);
        const { rows } = await tx.query(
          `WITH lapsed AS (
             DELETE FROM ${t.hold} WHERE queue = $1 AND key = $2 AND (expires_at_ms <= $3 OR member = $4)
           ), unparked AS (
             DELETE FROM ${t.parked} WHERE queue = $1 AND key = $2 AND job_id = split_part($4, ' ', 1)
           )
           SELECT
             coalesce((SELECT sum(items) FROM ${t.hold}
               WHERE queue = $1 AND key = $2 AND expires_at_ms > $3 AND member <> $4), 0)::int AS held,
             (SELECT tokens FROM ${t.bucket} WHERE queue = $1 AND key = $2) AS tokens,
             (SELECT at_ms FROM ${t.bucket} WHERE queue = $1 AND key = $2)::text AS at_ms`,
          [queue, request.key, request.now, request.member],
        );
        const row = rows[0] as { held: number; tokens: number | null; at_ms: string | null };
        const grant = grantItems(
          request.limits,
          {
            held: Number(row.held),
            ...(row.tokens === null ? {} : { bucket: { tokens: Number(row.tokens), atMs: Number(row.at_ms) } }),
          },
          request.want,
          request.now,
        );
        if (grant.limitedBy === 'concurrency') {
          // Parked in the same transaction as the refusal: a release from now on wakes it.
          await tx.query(
            `INSERT INTO ${t.parked} (queue, key, job_id, parked_at_ms) VALUES ($1, $2, split_part($3, ' ', 1), $4)
             ON CONFLICT (queue, key, job_id) DO UPDATE SET parked_at_ms = EXCLUDED.parked_at_ms`,
            [queue, request.key, request.member, request.now],
          );
          return grant;
        }
        const bucket = request.limits.rate ? grant.bucket : undefined;
        const hold = request.limits.concurrency !== undefined && grant.items > 0;
        if (bucket || hold) {
          await tx.query(
            `WITH bucket AS (
               INSERT INTO ${t.bucket} (queue, key, tokens, at_ms) SELECT $1, $2, $3, $4 WHERE $3::double precision IS NOT NULL
               ON CONFLICT (queue, key) DO UPDATE SET tokens = EXCLUDED.tokens, at_ms = EXCLUDED.at_ms
             )
             INSERT INTO ${t.hold} (queue, key, member, items, expires_at_ms) SELECT $1, $2, $5, $6, $7 WHERE $8::boolean`,
            [
              queue,
              request.key,
              bucket?.tokens ?? null,
              bucket?.atMs ?? 0,
              request.member,
              grant.items,
              request.expiry,
              hold,
            ],
          );
        }
        return grant;
      });
    },
    async settle(request) {
      const unused = request.granted - request.leased;
      const { rows } = await runner.query(
        `WITH refunded AS (
           UPDATE ${t.bucket} SET tokens = least($6::double precision, tokens + $4)
           WHERE queue = $1 AND key = $2 AND $4 > 0 AND $6 > 0
         ), shrunk AS (
           UPDATE ${t.hold} SET items = $5 WHERE queue = $1 AND key = $2 AND member = $3 AND $5 > 0
         ), ended AS (
           DELETE FROM ${t.hold} WHERE queue = $1 AND key = $2 AND member = $3 AND $5 = 0
         ), ${popParked.replace('AND EXISTS', 'AND $4 > 0 AND EXISTS')}
         SELECT job_id FROM popped`,
        [queue, request.key, request.member, unused, request.leased, request.limits.rate?.max ?? 0],
      );
      return rows[0] ? String(rows[0].job_id) : undefined;
    },
    async release(key, member) {
      const { rows } = await runner.query(
        `WITH ended AS (DELETE FROM ${t.hold} WHERE queue = $1 AND key = $2 AND member = $3), ${popParked}
         SELECT job_id FROM popped`,
        [queue, key, member],
      );
      return rows[0] ? String(rows[0].job_id) : undefined;
    },
    async renew(holds, expiry) {
      if (holds.length === 0) {
        return;
      }
      await runner.query(
        `UPDATE ${t.hold} h SET expires_at_ms = $2 FROM unnest($3::text[], $4::text[]) AS r(key, member)
         WHERE h.queue = $1 AND h.key = r.key AND h.member = r.member`,
        [queue, expiry, holds.map((hold) => hold.key), holds.map((hold) => hold.member)],
      );
    },
    async hasRoom(key, concurrency, now) {
      const { rows } = await runner.query(
        `SELECT coalesce(sum(items), 0)::int AS held FROM ${t.hold} WHERE queue = $1 AND key = $2 AND expires_at_ms > $3`,
        [queue, key, now],
      );
      return Number(rows[0]?.held ?? 0) < concurrency;
    },
    async sweep(now) {
      // A bucket idle for two of the longest intervals is full again; a lapsed hold counts for
      // nothing; a parked row older than any park time belongs to a job long woken or gone.
      await runner.query(
        `WITH buckets AS (DELETE FROM ${t.bucket} WHERE queue = $1 AND at_ms < $2::bigint - $3::bigint),
              holds AS (DELETE FROM ${t.hold} WHERE queue = $1 AND expires_at_ms < $2::bigint)
         DELETE FROM ${t.parked} WHERE queue = $1 AND parked_at_ms < $2::bigint - $3::bigint`,
        [queue, now, 2 * KEY_LIMIT_BOUNDS.intervalMs.max],
      );
    },
  };
}
