/** `/metrics` in Prometheus text format; queue depths are read from the queue backend at scrape time. */
import type { Queue } from 'bullmq';
import { Router } from 'express';
import type { Metrics } from '../../metrics.ts';

const STATES = ['waiting', 'active', 'delayed', 'failed', 'completed'] as const;

export function metricsRouter(metrics: Metrics, queues: readonly Queue[]): Router {
  const router = Router();
  router.get('/', async (_req, res) => {
    await Promise.all(
      queues.map(async (queue) => {
        const counts = await queue.getJobCounts(...STATES);
        for (const state of STATES) {
          metrics.queueDepth.set({ queue: queue.name, state }, counts[state] ?? 0);
        }
      }),
    );
    res.set('content-type', metrics.registry.contentType).send(await metrics.registry.metrics());
  });
  return router;
}
