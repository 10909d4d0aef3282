/**
 * One retention run: deletes what its policy says is past keeping, in bounded steps, and stops
 * when nothing more is due or its time budget is spent (what is left waits for the next run).
 * The reconciler runs it under its advisory lock (queue/reconciler.ts), so one process prunes
 * at a time.
 *
 * Never in the way of live work:
 * - each step is one short transaction deleting at most `batchRows` rows (pad versions, which
 *   may be 256 KiB each, at most a fiftieth of that); nothing is held between steps;
 * - after each step the run waits as long as the step took, so it uses at most about half of
 *   one connection while it has work, and the pool's other connections none;
 * - the budget is checked before every step, and the run stops at once on `signal` (shutdown);
 * - only finished operations, ended executions and pads' older versions are touched (see
 *   retention-sql.ts for the locks).
 *
 * Every stage gets an even share of the budget first, then whatever time is left goes to the
 * stages in order, so a backlog in one table (a year of item rows after an upgrade) does not
 * starve the others.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { BULK_EVENT_KINDS, mergePrunedFailures, type RetentionPolicy } from '../../domain/retention.ts';
import type { Database } from '../db/db.ts';
import { releaseStoredItems } from '../operations/operation-quota.ts';
import { pruneBulkActions } from './bulk-action-retention.ts';
import {
  AGED_TABLES,
  type AgedTable,
  deleteByIds,
  deleteEventRange,
  deleteExecutionTraces,
  deleteItemRange,
  deletePadVersions,
  endedExecutionsDue,
  type FinishedOperation,
  finishedOperationsDue,
  firstPrunedFailure,
  lockFinishedOperation,
  markTracesPruned,
  padsOverVersionLimit,
  readWatermark,
  saveOperationProgress,
  saveWatermark,
  scanAfter,
} from './retention-sql.ts';

/** The tables retention deletes from (the label of `opspad_retention_rows_pruned_total`). */
export const RETENTION_TABLES = [
  'assistant_operation_item',
  'operation_event',
  'scratchpad_trace',
  'context_render',
  'scratchpad_event',
  'scratchpad_version',
  'operator_bulk_action_target',
] as const;
export type RetentionTable = (typeof RETENTION_TABLES)[number];

export interface RetentionReport {
  /** Rows deleted, per table. */
  pruned: Record<RetentionTable, number>;
  /** Deleting transactions run. */
  steps: number;
  /** Operations whose item rows are now pruned. */
  operations: number;
  /** True when the run stopped because nothing more was due (not for time or shutdown). */
  caughtUp: boolean;
  ms: number;
}

export interface RetentionOptions {
  policy: RetentionPolicy;
  /** Aborted on shutdown: the run stops before its next step. */
  signal?: AbortSignal;
  /** Called after every step that deleted rows (metrics). */
  onPruned?(table: RetentionTable, rows: number): void;
}

/** How many candidates one query fetches (operations, executions, pads). */
const CANDIDATES = 50;
/** A pad version may be 256 KiB: a step deletes at most this share of `batchRows` of them. */
const PAD_VERSION_SHARE = 50;
/** Rows of an append-only table a run looks at first, before scanning a whole batch. */
const PROBE_ROWS = 100;
/** The longest pause between two steps. */
const MAX_PAUSE_MS = 1000;

class OutOfTime extends Error {}

/** The run's clock, budget and bookkeeping, shared by the stages. */
class Run {
  readonly report: RetentionReport;
  private deadline: number;
  private readonly started = Date.now();

  constructor(private readonly options: RetentionOptions) {
    this.deadline = this.started + options.policy.budgetMs;
    this.report = {
      pruned: Object.fromEntries(RETENTION_TABLES.map((t) => [t, 0])) as Record<RetentionTable, number>,
      steps: 0,
      operations: 0,
      caughtUp: false,
      ms: 0,
    };
  }

  get policy(): RetentionPolicy {
    return this.options.policy;
  }

  /** Runs `stage` until it is done or `until` (within the run's budget); true when done. */
  async within(until: number, stage: () => Promise<void>): Promise<boolean> {
    const saved = this.deadline;
    this.deadline = Math.min(saved, until);
    try {
      await stage();
      return true;
    } catch (error) {
      if (error instanceof OutOfTime) {
        return false;
      }
      throw error;
    } finally {
      this.deadline = saved;
    }
  }

  /** Throws {@link OutOfTime} when the budget is spent or the run is aborted. */
  check(): void {
    if (this.options.signal?.aborted || Date.now() >= this.deadline) {
      throw new OutOfTime();
    }
  }

  /** One deleting step, then a pause as long as it took (bounded, and cut short on abort). */
  async step<T>(run: () => Promise<T>): Promise<T> {
    this.check();
    const begun = Date.now();
    const result = await run();
    this.report.steps++;
    const took = Date.now() - begun;
    await sleep(Math.min(took, MAX_PAUSE_MS), undefined, { signal: this.options.signal }).catch(() => undefined);
    return result;
  }

  pruned(table: RetentionTable, rows: number): void {
    if (rows > 0) {
      this.report.pruned[table] += rows;
      this.options.onPruned?.(table, rows);
    }
  }

  finish(caughtUp: boolean): RetentionReport {
    this.report.caughtUp = caughtUp;
    this.report.ms = Date.now() - this.started;
    return this.report;
  }
}

// ─── Stages ─────────────────────────────────────────────────────────────────────────────────

/** Deletes one finished operation's item rows, keeping its first failures. */
async function pruneOperationItems(db: Database, run: Run, op: FinishedOperation): Promise<void> {
  const { batchRows, failuresKept } = run.policy;
  run.check();
  const firstPruned = await firstPrunedFailure(db, op.id, failuresKept);
  let from = op.through ?? 0;
  for (;;) {
    const to = Math.min(from + batchRows, op.total_items);
    const done = to >= op.total_items;
    // Transactions may be run again (a deadlock): their callbacks change nothing outside.
    const deletedRows = await run.step(() =>
      db.transaction(async (tx) => {
        const locked = await lockFinishedOperation(tx, op.id);
        if (!locked) {
          return null; // gone meanwhile (its organization deleted): nothing to do
        }
        const deleted = from < to ? await deleteItemRange(tx, op.id, from, to, firstPruned) : [];
        const failures = deleted.filter((d) => d.status === 'failed');
        const prunedFailures =
          failures.length > 0 || done
            ? mergePrunedFailures(
                locked.pruned_failures ?? undefined,
                failures.map((f) => ({ reason: f.reason, count: f.n })),
              )
            : undefined;
        await saveOperationProgress(tx, op.id, 'items', { through: to, done, prunedFailures });
        if (done) {
          await releaseStoredItems(tx, op.id);
        }
        return deleted.reduce((sum, d) => sum + d.n, 0);
      }),
    );
    if (deletedRows === null) {
      return;
    }
    run.pruned('assistant_operation_item', deletedRows);
    if (done) {
      run.report.operations++;
      return;
    }
    from = to;
  }
}

async function pruneItems(db: Database, run: Run): Promise<void> {
  const afterMs = run.policy.itemsAfterMs;
  if (afterMs === null) {
    return;
  }
  for (;;) {
    run.check();
    const due = await finishedOperationsDue(db, 'items', afterMs, CANDIDATES);
    for (const op of due) {
      await pruneOperationItems(db, run, op);
    }
    if (due.length < CANDIDATES) {
      return;
    }
  }
}

/** Deletes one finished operation's batch events; the events that say who did what stay. */
async function pruneOperationEvents(db: Database, run: Run, op: FinishedOperation): Promise<void> {
  let after = op.through ?? 0;
  for (;;) {
    const outcome = await run.step(() =>
      db.transaction(async (tx) => {
        if (!(await lockFinishedOperation(tx, op.id))) {
          return null;
        }
        const { last_id, scanned, deleted } = await deleteEventRange(
          tx,
          op.id,
          after,
          run.policy.batchRows,
          BULK_EVENT_KINDS,
        );
        const more = scanned === run.policy.batchRows;
        await saveOperationProgress(tx, op.id, 'events', { through: last_id ?? after, done: !more });
        return { deleted, more, through: last_id ?? after };
      }),
    );
    if (outcome === null) {
      return;
    }
    run.pruned('operation_event', outcome.deleted);
    if (!outcome.more) {
      return;
    }
    after = outcome.through;
  }
}

async function pruneEvents(db: Database, run: Run): Promise<void> {
  const afterMs = run.policy.eventsAfterMs;
  if (afterMs === null) {
    return;
  }
  for (;;) {
    run.check();
    const due = await finishedOperationsDue(db, 'events', afterMs, CANDIDATES);
    for (const op of due) {
      await pruneOperationEvents(db, run, op);
    }
    if (due.length < CANDIDATES) {
      return;
    }
  }
}

async function pruneExecutionTraces(db: Database, run: Run): Promise<void> {
  const afterMs = run.policy.tracesAfterMs;
  if (afterMs === null) {
    return;
  }
  for (;;) {
    run.check();
    const due = await endedExecutionsDue(db, afterMs, CANDIDATES);
    for (const executionId of due) {
      let after = 0;
      for (;;) {
        const { last_id, deleted } = await run.step(() =>
          db.transaction(async (tx) => {
            const result = await deleteExecutionTraces(tx, executionId, after, run.policy.batchRows);
            if (result.last_id === null || result.deleted < run.policy.batchRows) {
              await markTracesPruned(tx, executionId);
              return { last_id: null, deleted: result.deleted };
            }
            return result;
          }),
        );
        run.pruned('scratchpad_trace', deleted);
        if (last_id === null) {
          break;
        }
        after = last_id;
      }
    }
    if (due.length < CANDIDATES) {
      return;
    }
  }
}

/** Deletes rows of an append-only table older than `afterMs`, from its watermark on. */
async function pruneAged(db: Database, run: Run, aged: AgedTable, afterMs: number | null): Promise<void> {
  if (afterMs === null) {
    return;
  }
  run.check();
  let after = await readWatermark(db, aged.table);
  // A first look of a few rows: when nothing is due (most passes), that is all a pass reads.
  let limit = Math.min(PROBE_ROWS, run.policy.batchRows);
  for (;;) {
    run.check();
    const rows = await scanAfter(db, aged, after, afterMs, limit);
    // Ids follow time closely but not exactly (a transaction's rows carry its start time): the
    // watermark passes only rows that are due, so a row not yet due is looked at again later.
    const firstNotDue = rows.findIndex((r) => !r.due);
    const due = firstNotDue === -1 ? rows : rows.slice(0, firstNotDue);
    const last = due.at(-1);
    if (!last) {
      return;
    }
    const ids = due.filter((r) => r.deletable).map((r) => r.id);
    const deleted = await run.step(() =>
      db.transaction(async (tx) => {
        const n = await deleteByIds(tx, aged.table, ids);
        await saveWatermark(tx, aged.table, last.id);
        return n;
      }),
    );
    run.pruned(aged.table, deleted);
    after = last.id;
    if (due.length < limit) {
      return;
    }
    limit = run.policy.batchRows;
  }
}

async function prunePadVersions(db: Database, run: Run): Promise<void> {
  const keep = run.policy.padVersionsKept;
  if (keep === null) {
    return;
  }
  const perStep = Math.max(1, Math.floor(run.policy.batchRows / PAD_VERSION_SHARE));
  for (;;) {
    run.check();
    const pads = await padsOverVersionLimit(db, keep, CANDIDATES);
    for (const pad of pads) {
      const target = pad.version - keep;
      let current = pad;
      while (current.versions_pruned_through < target) {
        const through = Math.min(current.versions_pruned_through + perStep, target);
        const step = current;
        run.pruned(
          'scratchpad_version',
          await run.step(() => db.transaction((tx) => deletePadVersions(tx, step, through))),
        );
        current = { ...current, versions_pruned_through: through };
      }
    }
    if (pads.length < CANDIDATES) {
      return;
    }
  }
}

// ─── The run ────────────────────────────────────────────────────────────────────────────────

/** Runs retention once; see the module comment. */
export async function runRetention(db: Database, options: RetentionOptions): Promise<RetentionReport> {
  const run = new Run(options);
  const { policy } = options;
  const stages: (() => Promise<void>)[] = [
    () => pruneItems(db, run),
    () => pruneEvents(db, run),
    () => pruneExecutionTraces(db, run),
    () => pruneAged(db, run, AGED_TABLES.conversationTraces, policy.tracesAfterMs),
    () => pruneAged(db, run, AGED_TABLES.contextRenders, policy.rendersAfterMs),
    () => pruneAged(db, run, AGED_TABLES.scratchpadEvents, policy.eventsAfterMs),
    () => prunePadVersions(db, run),
    () => pruneBulkActions(db, run),
  ];
  const share = policy.budgetMs / stages.length;
  const pending = new Set(stages);
  // First an even share each, then what is left, in order.
  for (const round of ['share', 'rest'] as const) {
    for (const stage of stages) {
      if (!pending.has(stage)) {
        continue;
      }
      if (await run.within(round === 'share' ? Date.now() + share : Number.POSITIVE_INFINITY, stage)) {
        pending.delete(stage);
      }
    }
  }
  return run.finish(pending.size === 0);
}
