/**
 * The time budget of one batch. Its signal (the handler's `ctx.signal`) fires when the budget
 * runs out or when the batch is told to stop (pause, cancel, shutdown); `graceMs` after that,
 * `abandoned` resolves with the reason: a handler still running then has ignored its signal, and
 * the worker stops waiting for it (its slot is freed, its items handed out again).
 */
import { StopRequested } from './stop-signals.ts';

/** Why a batch was told to stop; the `reason` label of opspad_batches_abandoned_total. */
export type BatchStopReason = 'timeout' | 'paused' | 'cancelled' | 'shutdown' | 'stopped';

/** The signal's reason when the budget runs out. */
export class BatchTimeoutError extends Error {
  override readonly name = 'BatchTimeoutError';
  constructor(readonly budgetMs: number) {
    super(`the batch used its time budget of ${budgetMs} ms`);
  }
}

export interface BatchBudget {
  /** Fires when the budget runs out or the batch is told to stop. */
  readonly signal: AbortSignal;
  /** When the budget runs out, in milliseconds since the epoch. */
  readonly deadline: number;
  /** Resolves `graceMs` after the signal fired, with why it fired; never if disposed before. */
  readonly abandoned: Promise<BatchStopReason>;
  /** Why the signal fired, once it has. */
  readonly reason: BatchStopReason | undefined;
  /** Clears the timers and listeners (the batch is over). */
  dispose(): void;
}

export interface BatchBudgetOptions {
  budgetMs: number;
  graceMs: number;
  /** Pause/cancel (from the control channel) and shutdown signals. */
  stops: readonly (AbortSignal | undefined)[];
}

function reasonOf(cause: unknown): BatchStopReason {
  const reason = cause instanceof StopRequested ? cause.reason : undefined;
  return reason === 'paused' || reason === 'cancelled' || reason === 'shutdown' ? reason : 'stopped';
}

export function startBatchBudget(options: BatchBudgetOptions): BatchBudget {
  const controller = new AbortController();
  let reason: BatchStopReason | undefined;
  let graceTimer: NodeJS.Timeout | undefined;
  let resolveAbandoned: (reason: BatchStopReason) => void = () => {};
  const abandoned = new Promise<BatchStopReason>((resolve) => {
    resolveAbandoned = resolve;
  });
  const fire = (why: BatchStopReason, cause: unknown) => {
    if (reason) {
      return;
    }
    reason = why;
    clearTimeout(budgetTimer);
    controller.abort(cause);
    graceTimer = setTimeout(() => resolveAbandoned(why), options.graceMs);
  };
  const budgetTimer = setTimeout(() => fire('timeout', new BatchTimeoutError(options.budgetMs)), options.budgetMs);
  const listeners: [AbortSignal, () => void][] = [];
  for (const stop of options.stops) {
    if (!stop) {
      continue;
    }
    const onStop = () => fire(reasonOf(stop.reason), stop.reason);
    if (stop.aborted) {
      onStop();
      continue;
    }
    stop.addEventListener('abort', onStop, { once: true });
    listeners.push([stop, onStop]);
  }
  return {
    signal: controller.signal,
    deadline: Date.now() + options.budgetMs,
    abandoned,
    get reason() {
      return reason;
    },
    dispose() {
      clearTimeout(budgetTimer);
      clearTimeout(graceTimer);
      for (const [stop, onStop] of listeners) {
        stop.removeEventListener('abort', onStop);
      }
    },
  };
}
