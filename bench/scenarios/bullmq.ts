/**
 * Raw BullMQ, the baseline a job queue gives for free: one job per item with a no-op processor
 * (`bullmq_job_per_item`, the best of concurrency 10 and 100), and one job carrying a batch of
 * ids (what Redis costs once a job carries a batch; for the chart).
 *
 * Jobs are added before the worker starts and only processing is timed, with completed jobs
 * removed at once: the most favourable setting for BullMQ.
 */
import { Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { type BenchContext, type Entry, median, round, timed, waitFor } from '../lib/common.ts';

const ADD_CHUNK = 1_000;

async function runOnce(ctx: BenchContext, jobs: number, batch: number, concurrency: number): Promise<number> {
  const connection = new Redis(ctx.redisUrl, { maxRetriesPerRequest: null });
  const name = `raw-${batch}-${concurrency}-${Math.random().toString(36).slice(2, 8)}`;
  const queue = new Queue(name, { connection, prefix: ctx.prefix });
  const payload = { items: Array.from({ length: batch }, (_, i) => `contact-${String(i).padStart(8, '0')}`) };
  for (let start = 0; start < jobs; start += ADD_CHUNK) {
    const count = Math.min(ADD_CHUNK, jobs - start);
    await queue.addBulk(
      Array.from({ length: count }, () => ({ name: 'noop', data: payload, opts: { removeOnComplete: true } })),
    );
  }
  let done = 0;
  const workerConnection = new Redis(ctx.redisUrl, { maxRetriesPerRequest: null });
  const { ms } = await timed(async () => {
    const worker = new Worker(
      name,
      async () => {
        done++;
      },
      { connection: workerConnection, prefix: ctx.prefix, concurrency },
    );
    await waitFor(`${jobs} raw BullMQ jobs`, async () => (done >= jobs ? true : undefined), { everyMs: 5 });
    await worker.close();
  });
  await queue.obliterate({ force: true });
  await queue.close();
  connection.disconnect();
  workerConnection.disconnect();
  return ((jobs * batch) / ms) * 1000;
}

export async function benchBullmq(ctx: BenchContext): Promise<{ entries: Entry[]; chart: Record<number, number> }> {
  const { plan } = ctx;
  const byConcurrency: Record<number, number> = {};
  for (const concurrency of [10, 100]) {
    const runs: number[] = [];
    for (let i = 0; i < plan.repeats; i++) {
      runs.push(await runOnce(ctx, plan.bullmqJobs, 1, concurrency));
    }
    byConcurrency[concurrency] = median(runs);
    ctx.log(`raw BullMQ, job per item, concurrency ${concurrency}: ${Math.round(median(runs))} jobs/s`);
  }
  const best = Math.max(...Object.values(byConcurrency));
  const bestAt = Number(Object.entries(byConcurrency).find(([, v]) => v === best)?.[0]);
  const entries: Entry[] = [
    {
      name: 'bullmq_job_per_item',
      value: Math.round(best),
      unit: 'items/s',
      n: plan.bullmqJobs,
      note: `no-op, best of concurrency 10 (${Math.round(byConcurrency[10] ?? 0)}/s) and 100 (${Math.round(byConcurrency[100] ?? 0)}/s): ${bestAt}`,
    },
  ];
  const chart: Record<number, number> = { 1: best };
  for (const batch of [100, 1000]) {
    const runs: number[] = [];
    for (let i = 0; i < plan.repeats; i++) {
      runs.push(await runOnce(ctx, plan.bullmqBatchJobs, batch, 10));
    }
    chart[batch] = median(runs);
    entries.push({
      name: `bullmq_job_per_batch_b${batch}`,
      value: Math.round(median(runs)),
      unit: 'items/s',
      n: plan.bullmqBatchJobs * batch,
      note: `one no-op job carrying ${batch} ids, concurrency 10`,
    });
    ctx.log(`raw BullMQ, one job per ${batch} ids: ${round(median(runs), 0)} items/s`);
  }
  return { entries, chart };
}
