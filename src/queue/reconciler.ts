/**
 * Postgres is the source of truth; the queue (Redis, or BullMQ's tables in Postgres) only
 * dispatches. The reconciler makes the queue agree with opspad's tables again, at start and then
 * on an interval:
 * - an active background operation with no live job of its current lane generation (Redis was
 *   flushed or restarted without persistence, the queue schema emptied or restored from an older
 *   backup, a job failed for good) gets a new generation;
 * - expired leases go back to pending, so a crashed worker's items are handed out again;
 * - an operation whose items are all recorded but which is still active is completed;
 * - paused operations untouched for OPSPAD_PAUSED_TTL are cancelled (event `expired`);
 * - then retention deletes what is past keeping (store/retention/), within its time budget.
 *
 * It runs on a timer in every worker process rather than as a BullMQ job: it must keep working
 * when the queue has lost everything, its own schedule included. A Postgres advisory lock makes one
 * process do each pass.
 */
import { remainingOf } from '../domain/operation.ts';
import type { HandlerRegistry } from '../handlers/registry.ts';
import type { Logger } from '../logger.ts';
import {
  advanceDispatchEpoch,
  cancelOperation,
  completeIfDone,
  type Database,
  listActiveBackgroundOperationsAllOrganizations,
  listIdlePausedOperationsAllOrganizations,
  type RetentionOptions,
  type RetentionReport,
  reclaimExpiredLeases,
  runRetention,
  SESSION_LOCK,
} from '../store/index.ts';
import type { Dispatcher } from './dispatcher.ts';

const PAGE = 200;
const NIL_UUID = '00000000-0000-0000-0000-000000000000';

export interface ReconcileReport {
  checked: number;
  revived: number;
  completed: number;
  expired: number;
  /** What retention deleted in this pass (absent when retention is not configured or failed). */
  retention?: RetentionReport;
}

export interface Reconciler {
  /** A pass that begins after this call (one under way is waited for first). */
  runOnce(): Promise<ReconcileReport | undefined>;
  /**
   * Resolves once no pass is under way: the first one starts with the reconciler, and whatever it
   * finds due then is not left for a caller's next pass to report.
   */
  idle(): Promise<void>;
  stop(): Promise<void>;
}

export interface ReconcilerOptions {
  db: Database;
  dispatcher: Dispatcher;
  handlers: HandlerRegistry;
  logger: Logger;
  intervalMs: number;
  pausedTtlMs: number;
  /** This deployment's BullMQ prefix: only its own operations are reconciled. */
  queuePrefix: string;
  /** Re-creates the queue's job schedulers (a flushed Redis loses them). */
  ensureSchedulers?: () => Promise<void>;
  /** Retention, run after each pass under the same lock; unset: nothing is deleted. */
  retention?: Omit<RetentionOptions, 'signal'>;
}

/**
 * An operation touched within the last interval is left alone: its lanes may be being enqueued
 * at this moment, and a live one touches it at every batch.
 */
function graceMs(options: ReconcilerOptions): number {
  return Math.min(options.intervalMs, 5000);
}

async function pass(options: ReconcilerOptions): Promise<ReconcileReport> {
  const { db, dispatcher, handlers } = options;
  const report: ReconcileReport = { checked: 0, revived: 0, completed: 0, expired: 0 };
  await options.ensureSchedulers?.();
  const live = await dispatcher.liveLanes();
  let after = NIL_UUID;
  for (;;) {
    const page = await listActiveBackgroundOperationsAllOrganizations(db, options.queuePrefix, after, PAGE);
    for (const { operation, organizationId, conversationId, idleMs } of page) {
      after = operation.id;
      if (!handlers.has(operation.operation_type)) {
        continue; // another fleet's work
      }
      report.checked++;
      const scope = { organizationId, conversationId };
      const op = await reclaimExpiredLeases(db, scope, operation.id, 'reconciler');
      if (remainingOf(op) === 0) {
        if (await completeIfDone(db, scope, op.id, 'reconciler')) {
          report.completed++;
        }
        continue;
      }
      const hasLiveLane = live.has(`${op.id}.${op.state_json.dispatch_epoch}`);
      if (hasLiveLane || idleMs < graceMs(options)) {
        continue;
      }
      const revived = await advanceDispatchEpoch(db, scope, op.id);
      if (revived) {
        await dispatcher.startLanes(revived);
        report.revived++;
        options.logger.info(
          { operation_id: op.id, epoch: revived.state_json.dispatch_epoch },
          'operation re-dispatched',
        );
      }
    }
    if (page.length < PAGE) {
      break;
    }
  }
  const idle = await listIdlePausedOperationsAllOrganizations(db, Math.ceil(options.pausedTtlMs / 1000), PAGE);
  for (const { operationId, ...scope } of idle) {
    await cancelOperation(db, scope, operationId, {
      actor: 'reconciler',
      expiredReason: `paused longer than OPSPAD_PAUSED_TTL (${Math.round(options.pausedTtlMs / 1000)} s)`,
    });
    report.expired++;
  }
  return report;
}

/**
 * Retention after a pass, under the pass's lock: one process prunes at a time, on the
 * reconciler's schedule (no timer of its own). A failed run is logged and tried next pass; it
 * never keeps the pass's own report from being returned.
 */
async function retain(options: ReconcilerOptions, signal: AbortSignal): Promise<RetentionReport | undefined> {
  if (!options.retention || signal.aborted) {
    return undefined;
  }
  try {
    const report = await runRetention(options.db, { ...options.retention, signal });
    const pruned = Object.values(report.pruned).reduce((sum, n) => sum + n, 0);
    if (pruned > 0) {
      options.logger.info(
        { pruned: report.pruned, operations: report.operations, caught_up: report.caughtUp, ms: report.ms },
        'retention pruned rows',
      );
    }
    return report;
  } catch (error) {
    options.logger.warn({ err: error }, 'retention run failed; retrying on the next pass');
    return undefined;
  }
}

export function startReconciler(options: ReconcilerOptions): Reconciler {
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<ReconcileReport | undefined> | undefined;
  let stopped = false;
  const stopping = new AbortController();

  let queued: Promise<ReconcileReport | undefined> | undefined;
  const start = () => {
    running = options.db
      .withTryLock(SESSION_LOCK.reconcile, async () => {
        // Retention needs Postgres only: it runs even when the pass failed (the queue is down).
        const outcome = await pass(options).then(
          (report) => ({ report }),
          (error: unknown) => ({ error }),
        );
        const retention = await retain(options, stopping.signal);
        if ('error' in outcome) {
          throw outcome.error;
        }
        return retention ? { ...outcome.report, retention } : outcome.report;
      })
      .catch((error: unknown) => {
        options.logger.warn({ err: error }, 'reconcile pass failed; retrying on the next tick');
        return undefined;
      })
      .finally(() => {
        running = undefined;
      });
    return running;
  };
  // A pass asked for while one is under way runs after it: the caller sees a pass that began
  // after its call (the one in flight may have listed the operations before the caller's change).
  // Calls that arrive meanwhile share that next pass.
  const runOnce = (): Promise<ReconcileReport | undefined> => {
    if (stopped) {
      return Promise.resolve(undefined);
    }
    if (!running) {
      return start();
    }
    queued ??= running.then(() => {
      queued = undefined;
      return runOnce();
    });
    return queued;
  };
  const tick = async () => {
    const report = await runOnce();
    if (report && report.revived + report.completed + report.expired > 0) {
      options.logger.info(report, 'reconciled');
    }
    if (!stopped) {
      timer = setTimeout(tick, options.intervalMs);
    }
  };
  void tick();
  return {
    runOnce,
    async idle() {
      while (running || queued) {
        await (queued ?? running);
      }
    },
    async stop() {
      stopped = true;
      stopping.abort();
      clearTimeout(timer);
      await (queued ?? running);
    },
  };
}
