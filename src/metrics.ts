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
  batchesThrottled: Counter<'operation_type' | 'limited_by'>;
  leaseDuration: Histogram<'operation_type'>;
  handlerDuration: Histogram<'operation_type'>;
  recordDuration: Histogram<'operation_type'>;
  itemsReleased: Counter<'operation_type'>;
  retentionRowsPruned: Counter<'table'>;
}

/** Database statements: a lease or a record is one transaction, milliseconds when healthy. */
const STATEMENT_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];
const BATCH_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

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
      buckets: BATCH_BUCKETS,
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
    batchesThrottled: new Counter({
      name: 'opspad_batches_throttled_total',
      help: "Batch jobs parked because their key was at the handler's provider limit (rate or concurrency).",
      labelNames: ['operation_type', 'limited_by'],
      registers: [registry],
    }),
    leaseDuration: new Histogram({
      name: 'opspad_lease_duration_seconds',
      help: "Time to lease one batch of items in Postgres (one transaction), empty leases included; a lease made by a worker's record call counts that call's time.",
      labelNames: ['operation_type'],
      buckets: STATEMENT_BUCKETS,
      registers: [registry],
    }),
    handlerDuration: new Histogram({
      name: 'opspad_handler_duration_seconds',
      help: "Time the handler spends on one leased batch (every item's attempts), until it returns or is left behind.",
      labelNames: ['operation_type'],
      buckets: BATCH_BUCKETS,
      registers: [registry],
    }),
    recordDuration: new Histogram({
      name: 'opspad_record_duration_seconds',
      help: "Time to record one batch's results in Postgres (one transaction).",
      labelNames: ['operation_type'],
      buckets: STATEMENT_BUCKETS,
      registers: [registry],
    }),
    itemsReleased: new Counter({
      name: 'opspad_items_released_total',
      help: 'Leased items given back unhandled (pause, cancel, shutdown, a spent time budget) for another batch to take.',
      labelNames: ['operation_type'],
      registers: [registry],
    }),
    retentionRowsPruned: new Counter({
      name: 'opspad_retention_rows_pruned_total',
      help: 'Rows retention deleted, by table (counted in the process that ran retention: the reconciler holding the lock).',
      labelNames: ['table'],
      registers: [registry],
    }),
  };
}
