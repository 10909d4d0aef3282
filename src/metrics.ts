/**
 * Prometheus metrics. One registry per opspad instance (tests run several in one process).
 */
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { droppedLogLines } from './log-sink.ts';

export interface Metrics {
  registry: Registry;
  itemsRecorded: Counter<'operation_type' | 'outcome'>;
  batchDuration: Histogram<'operation_type'>;
  leaseExpiries: Counter<'operation_type'>;
  queueDepth: Gauge<'queue' | 'state'>;
  logLinesDropped: Counter;
  batchesAbandoned: Counter<'operation_type' | 'reason'>;
  abandonedPending: Gauge<'operation_type'>;
  batchesDeferred: Counter<'operation_type'>;
}

export function createMetrics(): Metrics {
  const registry = new Registry();
  return {
    registry,
    itemsRecorded: new Counter({
      name: 'opspad_items_recorded_total',
      help: 'Items recorded by workers, by operation type and outcome (completed or failed).',
      labelNames: ['operation_type', 'outcome'],
      registers: [registry],
    }),
    batchDuration: new Histogram({
      name: 'opspad_batch_duration_seconds',
      help: 'Time a worker spends on one batch: lease, handler, record.',
      labelNames: ['operation_type'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      registers: [registry],
    }),
    leaseExpiries: new Counter({
      name: 'opspad_lease_expiries_total',
      help: 'Items whose lease expired and went back to pending (a worker died or was too slow).',
      labelNames: ['operation_type'],
      registers: [registry],
    }),
    queueDepth: new Gauge({
      name: 'opspad_queue_jobs',
      help: 'Jobs in each BullMQ queue, by state; read from the queue backend (Redis or Postgres) at scrape time.',
      labelNames: ['queue', 'state'],
      registers: [registry],
    }),
    logLinesDropped: new Counter({
      name: 'opspad_log_lines_dropped_total',
      help: 'Log lines dropped because stdout was not being read (or was closed); counted for the whole process.',
      registers: [registry],
      // The count lives in the process's one stdout sink, shared by every logger.
      collect() {
        this.reset();
        this.inc(droppedLogLines());
      },
    }),
    batchesAbandoned: new Counter({
      name: 'opspad_batches_abandoned_total',
      help: 'Batches whose handler ignored its signal past the grace period and was left behind, by why the signal fired (timeout, paused, cancelled, shutdown, stopped).',
      labelNames: ['operation_type', 'reason'],
      registers: [registry],
    }),
    abandonedPending: new Gauge({
      name: 'opspad_abandoned_handlers',
      help: 'Handler calls left behind that have not returned yet (each may hold memory or a socket).',
      labelNames: ['operation_type'],
      registers: [registry],
    }),
    batchesDeferred: new Counter({
      name: 'opspad_batches_deferred_total',
      help: 'Batch jobs put back because their organization held its fair share of the slots while others waited.',
      labelNames: ['operation_type'],
      registers: [registry],
    }),
  };
}
