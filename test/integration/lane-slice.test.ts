/**
 * A batch job's decision to take its lane's next batch itself (src/queue/processors/lane-slice.ts),
 * on a real BullMQ job in Redis: it goes on while its slice lasts and it holds the job, asks Redis
 * on its first decision and again only once its confirmation may have lapsed, stops when the lock
 * is another run's, and hands the lane to a new job when the slice is over (a refused fair-share
 * slot does too: test/integration/fair-share.test.ts).
 */
import { type Job, Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createLaneSlice, type LaneSlice } from '../../src/queue/processors/lane-slice.ts';
import { deleteQueueKeys, testKey } from '../helpers/redis.ts';

const LOCK_MS = 30_000;

describe('a lane slice deciding who takes the next batch (redis)', () => {
  const prefix = testKey('lane-slice');
  let redis: Redis;
  let queue: Queue;
  let worker: Worker;
  let workerConnection: Redis;
  /** Runs `body` inside a real job run (its job and lock token), and returns what it returned. */
  let inJob: <T>(body: (job: Job, token: string) => Promise<T>) => Promise<T>;

  beforeAll(async () => {
    redis = new Redis(inject('redisUrl'), { maxRetriesPerRequest: null });
    queue = new Queue('slices', { connection: redis, prefix });
    workerConnection = redis.duplicate();
    const bodies = new Map<string, (job: Job, token: string) => Promise<unknown>>();
    worker = new Worker(
      'slices',
      async (job, token) =>
        (bodies.get(String(job.id)) as (job: Job, token: string) => Promise<unknown>)(job, token as string),
      { connection: workerConnection, prefix, lockDuration: LOCK_MS },
    );
    let n = 0;
    inJob = <T>(body: (job: Job, token: string) => Promise<T>) =>
      new Promise<T>((resolve, reject) => {
        const id = `job-${++n}`;
        bodies.set(id, (job, token) => body(job, token).then(resolve, reject));
        queue.add('step', {}, { jobId: id }).catch(reject);
      });
  });
  afterAll(async () => {
    await worker.close();
    await queue.close();
    await deleteQueueKeys(prefix);
    workerConnection.disconnect();
    redis.disconnect();
  });

  const slice = (job: Job, token: string, extra: Partial<Parameters<typeof createLaneSlice>[0]> = {}): LaneSlice =>
    createLaneSlice({
      job,
      token,
      jobLockMs: LOCK_MS,
      fair: undefined,
      organizationId: 'org',
      endsAt: Date.now() + 60_000,
      stopping: () => false,
      ...extra,
    });
  const lockKey = (job: Job) => `${prefix}:slices:${job.id}:lock`;

  it('goes on while it holds the job, asking Redis once, and stops when another run holds the lock', async () => {
    const decided = await inJob(async (job, token) => {
      const lane = slice(job, token);
      await redis.pexpire(lockKey(job), 1_000); // the lock close to lapsing: the first decision extends it
      const first = await lane.decideNext();
      const extended = await redis.pttl(lockKey(job));
      // Another run's lock now (a stalled run's job moved and taken): trusted for half the lock's
      // life, so this decision does not ask; nobody else can have taken the job that soon.
      await redis.set(lockKey(job), 'another-run', 'PX', LOCK_MS);
      const trusted = await lane.decideNext();
      // A slice that trusts no confirmation asks every time: the same slice goes on, then stops.
      await redis.set(lockKey(job), token, 'PX', LOCK_MS);
      const asking = slice(job, token, { trustLockMs: 0 });
      const before = await asking.decideNext();
      await redis.set(lockKey(job), 'another-run', 'PX', LOCK_MS);
      const stopped = await asking.decideNext();
      await redis.set(lockKey(job), token, 'PX', LOCK_MS); // give it back, so the job can finish
      return { first, extended, trusted, before, stopped };
    });
    expect(decided.first).toBe('go');
    expect(decided.extended).toBeGreaterThan(LOCK_MS / 2);
    expect(decided.trusted).toBe('go');
    expect(decided.before).toBe('go');
    expect(decided.stopped).toBe('stop');
  });

  it('hands the lane to a new job when its slice is over or the worker stops', async () => {
    const decided = await inJob(async (job, token) => ({
      over: await slice(job, token, { endsAt: Date.now() - 1 }).decideNext(),
      stopping: await slice(job, token, { stopping: () => true }).decideNext(),
    }));
    expect(decided).toEqual({ over: 'enqueue', stopping: 'enqueue' });
  });
});
