/**
 * The provider limits' two stores — one Redis script (key-limits-redis.ts) and one locked
 * Postgres transaction (key-limits-postgres.ts) — against the rule they must both apply,
 * domain/key-limits.ts's grantItems: random sequences of acquires, settles and releases on one
 * key, on real Redis and real Postgres, give the grants a model of the rule gives. Also: a job
 * parked at the key's concurrency is handed back by the release that frees room, once.
 */
import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { Redis } from 'ioredis';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { grantItems, type KeyLimitState, type KeyLimits } from '../../src/domain/key-limits.ts';
import type { KeyLimitStore } from '../../src/queue/key-limit-store.ts';
import { keyLimitTablesDdl, postgresKeyLimitStore } from '../../src/queue/key-limits-postgres.ts';
import { redisKeyLimitStore } from '../../src/queue/key-limits-redis.ts';
import type { SqlRunner } from '../../src/queue/postgres-counters.ts';
import { quoteSchema } from '../../src/queue/queue-schema.ts';
import { fileDatabaseUrl, fileQueuePrefix } from '../helpers/file-database.ts';

type Step =
  | { kind: 'acquire'; want: number; advanceMs: number }
  | { kind: 'settle'; of: number; leased: number }
  | { kind: 'release'; of: number };

/** The rule's own bookkeeping: what both stores must agree with. */
class Model {
  bucket: KeyLimitState['bucket'];
  holds = new Map<string, number>();
  constructor(readonly limits: KeyLimits) {}
  acquire(member: string, want: number, now: number) {
    const held = [...this.holds.values()].reduce((sum, n) => sum + n, 0);
    const grant = grantItems(this.limits, { bucket: this.bucket, held }, want, now);
    if (this.limits.rate && grant.bucket) {
      this.bucket = grant.bucket;
    }
    if (this.limits.concurrency !== undefined && grant.items > 0) {
      this.holds.set(member, grant.items);
    }
    return grant;
  }
  settle(member: string, granted: number, leased: number) {
    const unused = granted - leased;
    if (unused > 0 && this.limits.rate && this.bucket) {
      this.bucket = { ...this.bucket, tokens: Math.min(this.limits.rate.max, this.bucket.tokens + unused) };
    }
    if (this.holds.has(member)) {
      if (leased > 0) {
        this.holds.set(member, leased);
      } else {
        this.holds.delete(member);
      }
    }
  }
}

const limitsArbitrary: fc.Arbitrary<KeyLimits> = fc
  .record({
    rate: fc.option(
      fc.record({ max: fc.integer({ min: 1, max: 50 }), intervalMs: fc.integer({ min: 10, max: 2000 }) }),
      {
        nil: undefined,
      },
    ),
    concurrency: fc.option(fc.integer({ min: 1, max: 12 }), { nil: undefined }),
  })
  .filter((limits) => limits.rate !== undefined || limits.concurrency !== undefined)
  .map((limits) => ({
    ...(limits.rate ? { rate: limits.rate } : {}),
    ...(limits.concurrency === undefined ? {} : { concurrency: limits.concurrency }),
  }));

const stepsArbitrary: fc.Arbitrary<Step[]> = fc.array(
  fc.oneof(
    fc.record({
      kind: fc.constant('acquire' as const),
      want: fc.integer({ min: 1, max: 20 }),
      advanceMs: fc.integer({ min: 0, max: 700 }),
    }),
    fc.record({ kind: fc.constant('settle' as const), of: fc.nat(), leased: fc.nat({ max: 20 }) }),
    fc.record({ kind: fc.constant('release' as const), of: fc.nat() }),
  ),
  { minLength: 1, maxLength: 25 },
);

/** Runs `steps` on `store` and the model side by side, comparing every grant. */
async function agree(store: KeyLimitStore, limits: KeyLimits, steps: readonly Step[]) {
  const key = `org-${randomUUID()}`;
  const model = new Model(limits);
  const granted: { member: string; items: number; settled: boolean }[] = [];
  // A fixed clock: the stores are given `now`, so the sequence is the same for both.
  let now = 1_000_000;
  const expiry = () => now + 3_600_000;
  for (const step of steps) {
    if (step.kind === 'acquire') {
      now += step.advanceMs;
      const member = `job-${granted.length} 1`;
      const grant = await store.acquire({ key, member, want: step.want, limits, now, expiry: expiry() });
      const expected = model.acquire(member, step.want, now);
      expect(grant.items).toBe(expected.items);
      expect(grant.limitedBy).toBe(expected.limitedBy);
      // The two stores keep tokens as text (Redis) or a double (Postgres): a wait may round apart.
      expect(Math.abs(grant.waitMs - expected.waitMs)).toBeLessThanOrEqual(1);
      if (grant.items > 0) {
        granted.push({ member, items: grant.items, settled: false });
      }
      continue;
    }
    const hold = granted[step.of % Math.max(1, granted.length)];
    if (!hold || hold.settled) {
      continue;
    }
    if (step.kind === 'settle') {
      const leased = Math.min(step.leased, hold.items);
      await store.settle({ key, member: hold.member, granted: hold.items, leased, limits, now });
      model.settle(hold.member, hold.items, leased);
      hold.items = leased;
      hold.settled = leased === 0;
    } else {
      await store.release(key, hold.member);
      model.holds.delete(hold.member);
      hold.settled = true;
    }
  }
}

describe('provider limits: both stores apply the rule', () => {
  let redis: Redis;
  let pool: pg.Pool;
  let runner: SqlRunner;
  const schema = `opspad_limits_${randomUUID().slice(0, 8)}`;
  const prefix = `${fileQueuePrefix()}-limits-${randomUUID().slice(0, 8)}`;

  beforeAll(async () => {
    redis = new Redis(inject('redisUrl'));
    pool = new pg.Pool({ connectionString: fileDatabaseUrl(), max: 2 });
    runner = {
      query: (text, params) => pool.query(text, params as unknown[]),
      async transaction(fn) {
        const client = await pool.connect();
        try {
          await client.query('BEGIN');
          const result = await fn({ query: (text, params) => client.query(text, params as unknown[]) });
          await client.query('COMMIT');
          return result;
        } catch (error) {
          await client.query('ROLLBACK');
          throw error;
        } finally {
          client.release();
        }
      },
    };
    await pool.query(`CREATE SCHEMA ${quoteSchema(schema)}`);
    for (const statement of keyLimitTablesDdl(schema)) {
      await pool.query(statement);
    }
  });
  afterAll(async () => {
    const keys = await redis.keys(`${prefix}:*`);
    if (keys.length > 0) {
      await redis.del(...keys);
    }
    redis.disconnect();
    await pool.query(`DROP SCHEMA ${quoteSchema(schema)} CASCADE`);
    await pool.end();
  });

  const stores = (): [string, KeyLimitStore][] => [
    ['redis', redisKeyLimitStore({ commands: () => redis, prefix, operationType: 'send' })],
    ['postgres', postgresKeyLimitStore(runner, schema, 'batches-send')],
  ];

  it('grants what grantItems grants, on every sequence', async () => {
    await fc.assert(
      fc.asyncProperty(limitsArbitrary, stepsArbitrary, async (limits, steps) => {
        for (const [, store] of stores()) {
          await agree(store, limits, steps);
        }
      }),
      { numRuns: 60 },
    );
  });

  it('sweeps the Postgres state that keys of tenants leave behind', async () => {
    const store = postgresKeyLimitStore(runner, schema, 'batches-sweep');
    const limits = { rate: { max: 5, intervalMs: 1000 }, concurrency: 1 };
    const now = Date.now();
    for (const key of ['org-x:acct-1', 'org-x:acct-2']) {
      await store.acquire({ key, member: 'a 1', want: 1, limits, now, expiry: now + 60_000 });
      await store.acquire({ key, member: 'b 1', want: 1, limits, now, expiry: now + 60_000 });
    }
    const rows = async () => {
      const counts = await pool.query<{ n: number }>(
        `SELECT ((SELECT count(*) FROM ${quoteSchema(schema)}.opspad_limit_bucket WHERE queue = 'batches-sweep')
              + (SELECT count(*) FROM ${quoteSchema(schema)}.opspad_limit_hold WHERE queue = 'batches-sweep')
              + (SELECT count(*) FROM ${quoteSchema(schema)}.opspad_limit_parked WHERE queue = 'batches-sweep'))::int AS n`,
      );
      return counts.rows[0]?.n;
    };
    // Two buckets, two holds, two parked jobs.
    expect(await rows()).toBe(6);
    await store.sweep(now);
    expect(await rows()).toBe(6);
    await store.sweep(now + 3 * 3_600_000);
    expect(await rows()).toBe(0);
  });

  it('hands a job parked at the concurrency back to the release that frees room, once', async () => {
    for (const [name, store] of stores()) {
      const key = `org-${randomUUID()}`;
      const limits = { concurrency: 2 };
      const now = Date.now();
      const first = await store.acquire({ key, member: 'a 1', want: 2, limits, now, expiry: now + 60_000 });
      expect(first.items, name).toBe(2);
      const refused = await store.acquire({ key, member: 'b 1', want: 1, limits, now, expiry: now + 60_000 });
      expect(refused, name).toMatchObject({ items: 0, limitedBy: 'concurrency' });
      expect(await store.hasRoom(key, 2, now), name).toBe(false);
      // The refusal parked job b: the release wakes it.
      expect(await store.release(key, 'a 1'), name).toBe('b');
      expect(await store.hasRoom(key, 2, now), name).toBe(true);
      expect(await store.release(key, 'a 1'), name).toBeUndefined();
      // A hold that lapsed (its process died) counts for nothing.
      await store.acquire({ key, member: 'c 1', want: 2, limits, now, expiry: now + 10 });
      const after = await store.acquire({ key, member: 'd 1', want: 2, limits, now: now + 20, expiry: now + 60_000 });
      expect(after.items, name).toBe(2);
    }
  });
});
