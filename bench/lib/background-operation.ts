/**
 * A background operation of the bench: created in the run's database for a queue prefix, its
 * lanes dispatched from the bench, timed until the ledger says it completed; and what a process
 * spent on it (CPU time from /proc).
 */
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import type { OperationRecord } from '../../src/domain/operation.ts';
import { createHandlerRegistry } from '../../src/handlers/registry.ts';
import type { Handler } from '../../src/handlers/types.ts';
import { createDispatcher, type Dispatcher } from '../../src/queue/dispatcher.ts';
import { createRedisQueueBackend } from '../../src/queue/redis-backend.ts';
import { createOperation } from '../../src/store/index.ts';
import { type BenchContext, type Entry, itemIds, round, rssMb, sampleRss, waitFor } from './common.ts';

export interface BackgroundOperationSpec {
  organizationId: string;
  operationType: string;
  items: number;
  batchSize: number;
  queryParams: Record<string, unknown>;
  /** The prefix of the workers that are to run it. */
  queuePrefix: string;
  maxParallelBatches?: number;
}

export async function createBackgroundOperation(
  ctx: BenchContext,
  spec: BackgroundOperationSpec,
): Promise<OperationRecord> {
  const { operation } = await createOperation(
    ctx.db,
    { organizationId: spec.organizationId, conversationId: randomUUID() },
    {
      operationType: spec.operationType,
      itemIds: itemIds(spec.items),
      batchSize: spec.batchSize,
      queryParams: spec.queryParams,
      notes: null,
      execution: 'background',
      queuePrefix: spec.queuePrefix,
      ...(spec.maxParallelBatches ? { maxParallelBatches: spec.maxParallelBatches } : {}),
      actor: 'bench',
    },
  );
  return operation;
}

/** Resolves once the operation's row says `completed`, polling every `everyMs`. */
export function waitUntilCompleted(ctx: BenchContext, operationId: string, everyMs: number): Promise<true> {
  return waitFor(
    `operation ${operationId} to complete`,
    async () => {
      const rows = await ctx.db.query<{ status: string }>('SELECT status FROM assistant_operation WHERE id = $1', [
        operationId,
      ]);
      return rows[0]?.status === 'completed' ? true : undefined;
    },
    { everyMs },
  );
}

/** Dispatches the operation's lanes and waits for it to complete; seconds from dispatch to completion. */
export async function runToCompletion(
  ctx: BenchContext,
  dispatcher: Dispatcher,
  operation: OperationRecord,
  everyMs: number,
): Promise<number> {
  const start = performance.now();
  await dispatcher.startLanes(operation);
  await waitUntilCompleted(ctx, operation.id, everyMs);
  return (performance.now() - start) / 1000;
}

/** User and system CPU seconds a process has used so far (Linux: /proc/<pid>/stat, 100 ticks a second). */
export function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name (which may hold spaces), from field 3 on: utime is 14, stime 15.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** A dispatcher on the run's Redis for `prefix`, knowing `handlers`' types; closed at the run's end. */
export async function benchDispatcher(
  ctx: BenchContext,
  prefix: string,
  handlers: readonly Handler[],
): Promise<Dispatcher> {
  const backend = await createRedisQueueBackend({ target: { kind: 'single', url: ctx.redisUrl }, queuePrefix: prefix });
  const dispatcher = createDispatcher({ backend, handlers: createHandlerRegistry(handlers) });
  ctx.defer(async () => {
    await dispatcher.close();
    await backend.close();
  });
  return dispatcher;
}

/** What a worker process spent on one operation run to completion (runToCompletion). */
export interface WatchedRun {
  seconds: number;
  cpuSeconds: number;
  peakRssMb: number;
}

/** runToCompletion, watching the worker process `pid`: its CPU time and its peak RSS meanwhile. */
export async function runWatched(
  ctx: BenchContext,
  dispatcher: Dispatcher,
  operation: OperationRecord,
  pid: number,
): Promise<WatchedRun> {
  const rss = sampleRss(pid, 50);
  const cpuBefore = cpuSeconds(pid);
  const seconds = await runToCompletion(ctx, dispatcher, operation, 10);
  const cpu = cpuSeconds(pid) - cpuBefore;
  return { seconds, cpuSeconds: cpu, peakRssMb: Math.max(rss.stop(), rssMb(pid, 'VmHWM')) };
}

/** `<scenario>_worker_peak_rss_mb` and `<scenario>_cpu_us_per_item` of a watched run. */
export function workerCostEntries(scenario: string, items: number, run: WatchedRun, inFlight: string): Entry[] {
  return [
    {
      name: `${scenario}_worker_peak_rss_mb`,
      value: round(run.peakRssMb, 0),
      unit: 'MB',
      n: items,
      note: `the worker process, ${inFlight} in flight`,
    },
    {
      name: `${scenario}_cpu_us_per_item`,
      value: round((run.cpuSeconds / items) * 1e6, 1),
      unit: 'µs',
      n: items,
      note: `the worker process's user + system CPU over the run, per item (${round(run.cpuSeconds, 2)} s in all)`,
    },
  ];
}
