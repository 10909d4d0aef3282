/**
 * Lane slices (src/queue/processors/run-batch.ts): a batch job goes on with its lane's next
 * batches itself for a while instead of queueing a job for each, every batch still leased,
 * recorded and logged on its own (each record leasing the next batch in the same call); a handler
 * with a rate limit keeps one batch per job (BullMQ's limiter counts jobs), and so does every
 * handler with OPSPAD_LANE_SLICE=0. Every item is handled exactly once either way, and the last
 * batch's record completes the operation in the same call.
 */
import { randomUUID } from 'node:crypto';
import type { Job } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ItemHandler } from '../../src/handlers/types.ts';
import { batchQueueName } from '../../src/queue/catalog.ts';
import { type Harness, ids, QUEUE_BACKENDS, startHarness, type Tenant } from '../helpers/harness.ts';
import { eventually, finished, waitForProgress } from '../helpers/wait.ts';

const CASES = [
  ...QUEUE_BACKENDS.map((queue) => ({ queue, slice: 'default' })),
  { queue: 'redis' as const, slice: '0' },
];

describe.each(CASES)('lane slices (postgres database, $queue queue, OPSPAD_LANE_SLICE $slice)', ({ queue, slice }) => {
  let harness: Harness;
  let tenant: Tenant;
  const sliced = slice !== '0';
  const handled = new Map<string, number>();
  const count = (itemId: string) => handled.set(itemId, (handled.get(itemId) ?? 0) + 1);
  const quick: ItemHandler = { type: 'quick', concurrency: 2, handle: async (itemId) => void count(itemId) };
  // A limit far above what the test needs: it changes how jobs are cut, not how fast they run.
  const metered: ItemHandler = {
    type: 'metered',
    concurrency: 2,
    rateLimit: { max: 100_000, durationMs: 1000 },
    batchSize: 5,
    handle: async (itemId) => void count(itemId),
  };

  beforeAll(async () => {
    harness = await startHarness('postgres', {
      queue,
      workers: true,
      handlers: [quick, metered],
      env: sliced ? {} : { OPSPAD_LANE_SLICE: '0' },
    });
    tenant = await harness.newTenant();
  });
  afterAll(async () => {
    await harness.close();
  });

  /** Runs an operation of `items` ids in one lane to its end; returns its jobs as they finished. */
  async function runOneLane(type: string, prefix: string, items: number) {
    const conversation = randomUUID();
    const itemIds = ids(items, prefix);
    const created = await tenant.op(conversation, {
      action: 'create',
      operation_type: type,
      total_items: items,
      item_ids: itemIds,
      batch_size: 5,
      max_parallel_batches: 1,
    });
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    const operationId = created.body.operation_id as string;
    const end = await waitForProgress(harness.url, tenant, operationId, finished);
    expect(end).toMatchObject({ status: 'completed', completed_count: items, failed_count: 0 });
    expect(itemIds.map((id) => handled.get(id))).toEqual(itemIds.map(() => 1));
    const batchQueue = harness.service.dispatcher.queues.find((q) => q.name === batchQueueName(type));
    // The operation completes when its last record commits; the job that recorded it is marked
    // completed just after, so wait until the completed jobs account for every item.
    const jobs = await eventually(
      async () => {
        const completed: Job[] = (await batchQueue?.getJobs(['completed'])) ?? [];
        const mine = completed.filter((job) => job.data.operation_id === operationId);
        const leasedByJobs = mine.reduce(
          (sum, job) => sum + ((job.returnvalue as { leased?: number })?.leased ?? 0),
          0,
        );
        return leasedByJobs >= items ? mine : undefined;
      },
      { what: "the lane's jobs to be marked completed" },
    );
    const leased = await harness.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM operation_event WHERE operation_id = $1 AND kind = 'batch_leased'`,
      [operationId],
    );
    // A lease written by a record's call shares its transaction's timestamp and actor.
    const chained = await harness.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM operation_event l JOIN operation_event r
         ON r.operation_id = l.operation_id AND r.created_at = l.created_at AND r.actor = l.actor
       WHERE l.operation_id = $1 AND l.kind = 'batch_leased' AND r.kind = 'batch_recorded'`,
      [operationId],
    );
    // The last batch's record completed the operation in its own call: it shares the record's
    // transaction timestamp (the lane asked for no next batch, nothing being left to lease).
    const [finish] = await harness.db.query<{ in_the_record: boolean }>(
      `SELECT c.created_at = (SELECT max(r.created_at) FROM operation_event r
                              WHERE r.operation_id = c.operation_id AND r.kind = 'batch_recorded') AS in_the_record
       FROM operation_event c WHERE c.operation_id = $1 AND c.kind = 'completed'`,
      [operationId],
    );
    return {
      jobs,
      batchesLeased: leased[0]?.n ?? 0,
      leasedByRecords: chained[0]?.n ?? 0,
      completedInTheRecord: finish?.in_the_record,
    };
  }

  it("runs a lane's batches in fewer jobs than batches (unless off), each batch leased, recorded and logged", async () => {
    const { jobs, batchesLeased, leasedByRecords, completedInTheRecord } = await runOneLane('quick', 'slice', 60);
    expect(batchesLeased).toBe(12);
    expect(completedInTheRecord).toBe(true);
    const results = jobs.map((job) => job.returnvalue as { batches: number; leased: number });
    expect(results.reduce((sum, r) => sum + r.leased, 0)).toBe(60);
    if (sliced) {
      expect(jobs.length).toBeLessThan(12);
      expect(Math.max(...results.map((r) => r.batches))).toBeGreaterThan(1);
      // Within a job, each batch after the first was leased by the call that recorded the one before.
      expect(leasedByRecords).toBe(results.reduce((sum, r) => sum + r.batches - 1, 0));
    } else {
      expect(leasedByRecords).toBe(0);
      expect(results.every((r) => r.batches === 1)).toBe(true); // off: one batch per job
    }
    // Every batch is in the log of the job that ran it: a line of its own, or of the batches
    // that came too soon after a report (batch-report.ts), with their sum.
    const batchQueue = harness.service.dispatcher.queues.find((q) => q.name === batchQueueName('quick'));
    const logged = { batches: 0, completed: 0 };
    for (const job of jobs) {
      const { logs } = (await batchQueue?.getJobLogs(String(job.id))) ?? { logs: [] };
      for (const line of logs) {
        const batch = /^lane 0 step \d+(?: batch \d+| batches (\d+)-(\d+))?: (\d+) completed/.exec(line);
        if (batch) {
          logged.batches += batch[1] ? Number(batch[2]) - Number(batch[1]) + 1 : 1;
          logged.completed += Number(batch[3]);
        }
      }
    }
    expect(logged).toEqual({ batches: 12, completed: 60 });
  });

  it('keeps one batch per job for a handler with a rate limit', async () => {
    const { jobs, batchesLeased } = await runOneLane('metered', 'metered', 30);
    expect(batchesLeased).toBe(6);
    const results = jobs.map((job) => job.returnvalue as { batches: number; leased: number });
    expect(results.every((r) => r.batches === 1)).toBe(true);
    expect(results.filter((r) => r.leased > 0)).toHaveLength(6);
  });
});
