/**
 * Runs a handler over a leased batch inside the batch's time budget. When the budget runs out,
 * or the batch is told to stop, `ctx.signal` fires; a handler that honours it returns with the
 * items it did not finish. One that ignores it is abandoned `graceMs` later: the worker stops
 * waiting, keeps what was finished before that, and gives the rest back. Its promise is left to
 * settle on its own — a late result is never recorded (the items are someone else's by then) and
 * a late rejection is caught.
 */

import { type BatchOutcome, emptyProgress, runHandler } from '../../handlers/run-handler.ts';
import type { Handler, HandlerContext } from '../../handlers/types.ts';
import { type BatchStopReason, startBatchBudget } from '../batch-budget.ts';

export interface BudgetedOutcome extends BatchOutcome {
  /** Why the batch was told to stop, if it was. */
  stoppedBy: BatchStopReason | undefined;
  /** True when the handler ignored its signal past the grace period and was left behind. */
  abandoned: boolean;
  /** Items the budget cut short (in the handler's hands when it ran out); among `unhandled`. */
  exhausted: string[];
  /** The last error of an exhausted item, when it had failed before. */
  lastError: string | undefined;
}

export interface BudgetOptions {
  budgetMs: number;
  graceMs: number;
  /** Pause/cancel and shutdown signals. */
  stops: readonly (AbortSignal | undefined)[];
  /** Called once the abandoned handler call settles at last (for the pending-abandoned gauge). */
  onAbandonedSettled?: () => void;
}

export async function runWithinBudget(
  handler: Handler,
  batch: readonly string[],
  ctx: Omit<HandlerContext, 'signal' | 'deadline'>,
  options: BudgetOptions,
): Promise<BudgetedOutcome> {
  const budget = startBatchBudget({ budgetMs: options.budgetMs, graceMs: options.graceMs, stops: options.stops });
  const progress = emptyProgress();
  const running = runHandler(handler, batch, { ...ctx, signal: budget.signal, deadline: budget.deadline }, progress);
  try {
    const first = await Promise.race([
      running.then((outcome) => ({ finished: true as const, outcome })),
      budget.abandoned.then((reason) => ({ finished: false as const, reason })),
    ]);
    if (first.finished) {
      const cutShort = budget.reason === 'timeout';
      return {
        ...first.outcome,
        stoppedBy: budget.reason,
        abandoned: false,
        exhausted: cutShort ? [...progress.interrupted] : [],
        lastError: progress.lastError,
      };
    }
    // Left behind: whatever it does from now on is ignored, a rejection included.
    const settled = () => options.onAbandonedSettled?.();
    running.then(settled, settled);
    const completed = [...progress.completed];
    const failed = progress.failed.map((failure) => ({ ...failure }));
    const recorded = new Set([...completed, ...failed.map((failure) => failure.id)]);
    return {
      completed,
      failed,
      unhandled: batch.filter((id) => !recorded.has(id)),
      stoppedBy: first.reason,
      abandoned: true,
      exhausted: first.reason === 'timeout' ? [...progress.current].filter((id) => !recorded.has(id)) : [],
      lastError: progress.lastError,
    };
  } finally {
    budget.dispose();
  }
}
