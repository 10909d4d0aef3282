/**
 * The fair share's state on the Postgres queue backend: UNLOGGED tables of the queue's schema
 * (registered workers, running batches, parked jobs, the arrivals count), one row set per queue.
 * A decision is one transaction holding a lock on the queue's fair share: it drops what has
 * lapsed, reads the fleet's slots, the running batches and the arrivals count in one statement,
 * applies domain/fair-share.ts's `mayStart` itself (no second copy of the rule, as the Redis
 * script needs) and adds the batch when it may start. Every other operation is one statement.
 *
 * UNLOGGED, as Redis without persistence: a crash empties the tables; registrations come back at
 * the next heartbeat, parked jobs wake by their own delay, and a lost arrivals count only makes
 * the next decision refresh its view.
 */
import { FAIR_SHARE_WEIGHT, mayStart } from '../domain/fair-share.ts';
import { queueLockSubject } from '../store/db/lock-keys.ts';
import type { FairAcquireRequest, FairRegistration, FairShareStore } from './fair-share-store.ts';
import type { SqlRunner } from './postgres-counters.ts';
import { quoteSchema } from './queue-schema.ts';

/** DDL, run with the queue schema's migrations (idempotent). */
export function fairShareTablesDdl(schema: string): string[] {
  const s = quoteSchema(schema);
  return [
    `CREATE UNLOGGED TABLE IF NOT EXISTS ${s}.opspad_fair_worker (
      queue text NOT NULL, worker_id text NOT NULL, slots integer NOT NULL, expires_at_ms bigint NOT NULL,
      PRIMARY KEY (queue, worker_id)
    )`,
    `CREATE UNLOGGED TABLE IF NOT EXISTS ${s}.opspad_fair_running (
      queue text NOT NULL, member text NOT NULL, organization_id text NOT NULL, expires_at_ms bigint NOT NULL,
      PRIMARY KEY (queue, member)
    )`,
    `CREATE UNLOGGED TABLE IF NOT EXISTS ${s}.opspad_fair_parked (
      queue text NOT NULL, job_id text NOT NULL, parked_at_ms bigint NOT NULL,
      PRIMARY KEY (queue, job_id)
    )`,
    `CREATE UNLOGGED TABLE IF NOT EXISTS ${s}.opspad_fair_arrivals (
      queue text PRIMARY KEY, arrivals bigint NOT NULL
    )`,
  ];
}

/** A view's organizations as the rule reads them, built once however many decisions read it. */
const viewMaps = new WeakMap<
  FairAcquireRequest['waiting'],
  { waiting: ReadonlyMap<string, number>; weights: ReadonlyMap<string, number> }
>();

function mapsOf(request: FairAcquireRequest) {
  let maps = viewMaps.get(request.waiting);
  if (maps === undefined) {
    maps = {
      waiting: new Map(request.waiting.map(([organization, lanes]) => [organization, lanes])),
      weights: new Map(
        request.waiting.map(([organization, , weight]) => [organization, weight ?? FAIR_SHARE_WEIGHT.default]),
      ),
    };
    viewMaps.set(request.waiting, maps);
  }
  // The view's weight wins over the request's for a listed candidate, as in the Redis script.
  const own = request.weight ?? FAIR_SHARE_WEIGHT.default;
  if (maps.weights.has(request.organizationId) || own === FAIR_SHARE_WEIGHT.default) {
    return maps;
  }
  return { waiting: maps.waiting, weights: new Map([...maps.weights, [request.organizationId, own]]) };
}

export function postgresFairShareStore(runner: SqlRunner, schema: string, queue: string): FairShareStore {
  const s = quoteSchema(schema);
  const t = {
    worker: `${s}.opspad_fair_worker`,
    running: `${s}.opspad_fair_running`,
    parked: `${s}.opspad_fair_parked`,
    arrivals: `${s}.opspad_fair_arrivals`,
  };
  /** Takes up to $2 parked jobs of the queue, longest parked first (as a CTE named `popped`). */
  const popParked = `popped AS (
    DELETE FROM ${t.parked} WHERE queue = $1 AND job_id IN (
      SELECT job_id FROM ${t.parked} WHERE queue = $1 ORDER BY parked_at_ms, job_id LIMIT $2 FOR UPDATE SKIP LOCKED
    ) RETURNING job_id, parked_at_ms)`;

  return {
    async heartbeat(registration, running, expiry, wake) {
      const { rows } = await runner.query(
        `WITH registered AS (
           INSERT INTO ${t.worker} (queue, worker_id, slots, expires_at_ms) VALUES ($1, $3, $4, $5)
           ON CONFLICT (queue, worker_id) DO UPDATE SET slots = EXCLUDED.slots, expires_at_ms = EXCLUDED.expires_at_ms
         ), renewed AS (
           UPDATE ${t.running} SET expires_at_ms = $5 WHERE queue = $1 AND member = ANY($6::text[])
         ), ${popParked}
         SELECT job_id FROM popped ORDER BY parked_at_ms, job_id`,
        [queue, Math.max(0, wake), registration.id, registration.slots, expiry, [...running]],
      );
      return rows.map((row) => String(row.job_id));
    },
    async acquire(request) {
      // Built before the lock is taken, once a view.
      const { waiting, weights } = mapsOf(request);
      return runner.transaction(async (tx) => {
        await tx.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [
          queueLockSubject(schema, 'fair', queue),
        ]);
        const { rows } = await tx.query(
          `WITH lapsed_running AS (
             DELETE FROM ${t.running} WHERE queue = $1 AND (expires_at_ms <= $2 OR member = $3)
           ), lapsed_workers AS (
             DELETE FROM ${t.worker} WHERE queue = $1 AND expires_at_ms <= $2
           )
           SELECT
             coalesce((SELECT arrivals FROM ${t.arrivals} WHERE queue = $1), 0)::text AS arrivals,
             coalesce((SELECT sum(slots) FROM ${t.worker} WHERE queue = $1 AND expires_at_ms > $2), 0)::int AS slots,
             coalesce((
               SELECT json_object_agg(organization_id, n) FROM (
                 SELECT organization_id, count(*)::int AS n FROM ${t.running}
                 WHERE queue = $1 AND expires_at_ms > $2 AND member <> $3 GROUP BY organization_id
               ) counted
             ), '{}'::json) AS running`,
          [queue, request.now, request.member],
        );
        const state = rows[0] as { arrivals: string; slots: number; running: Record<string, number> };
        if (state.arrivals !== request.arrivals) {
          return { code: -1, arrivals: state.arrivals };
        }
        const started = mayStart(
          { slots: state.slots, running: new Map(Object.entries(state.running)), waiting, weights },
          request.organizationId,
        );
        if (!started) {
          return { code: 0, arrivals: state.arrivals };
        }
        await tx.query(
          `INSERT INTO ${t.running} (queue, member, organization_id, expires_at_ms) VALUES ($1, $2, $3, $4)`,
          [queue, request.member, request.organizationId, request.expiry],
        );
        return { code: 1, arrivals: state.arrivals };
      });
    },
    async forceStart(member, organizationId, expiry) {
      await runner.query(
        `INSERT INTO ${t.running} (queue, member, organization_id, expires_at_ms) VALUES ($1, $2, $3, $4)
         ON CONFLICT (queue, member) DO UPDATE SET expires_at_ms = EXCLUDED.expires_at_ms`,
        [queue, member, organizationId, expiry],
      );
    },
    async finish(member) {
      const { rows } = await runner.query(
        `WITH ended AS (DELETE FROM ${t.running} WHERE queue = $1 AND member = $3), ${popParked}
         SELECT job_id FROM popped`,
        [queue, 1, member],
      );
      return rows[0] ? String(rows[0].job_id) : undefined;
    },
    async drop(member) {
      await runner.query(`DELETE FROM ${t.running} WHERE queue = $1 AND member = $2`, [queue, member]);
    },
    async park(jobId, now) {
      await runner.query(
        `INSERT INTO ${t.parked} (queue, job_id, parked_at_ms) VALUES ($1, $2, $3)
         ON CONFLICT (queue, job_id) DO UPDATE SET parked_at_ms = EXCLUDED.parked_at_ms`,
        [queue, jobId, now],
      );
    },
    async unregister(registration) {
      await runner.query(`DELETE FROM ${t.worker} WHERE queue = $1 AND worker_id = $2`, [queue, registration.id]);
    },
    async announceArrival() {
      await runner.query(
        `INSERT INTO ${t.arrivals} AS a (queue, arrivals) VALUES ($1, 1)
         ON CONFLICT (queue) DO UPDATE SET arrivals = a.arrivals + 1`,
        [queue],
      );
    },
  };
}

/**
 * The worker processes registered for `queue` (every batch queue when null) whose registration
 * has not lapsed: how Bull Board lists the workers of the Postgres backend, whose connections
 * BullMQ cannot tell apart (postgres-backend.ts).
 */
export async function registeredWorkers(
  runner: SqlRunner,
  schema: string,
  queue: string | null,
  now: number,
): Promise<FairRegistration[]> {
  const { rows } = await runner.query(
    `SELECT worker_id, max(slots)::int AS slots FROM ${quoteSchema(schema)}.opspad_fair_worker
     WHERE expires_at_ms > $2 AND ($1::text IS NULL OR queue = $1)
     GROUP BY worker_id ORDER BY worker_id`,
    [queue, now],
  );
  return rows.map((row) => ({ id: String(row.worker_id), slots: Number(row.slots) }));
}
