/**
 * A batch's time budget: the signal fires when the budget runs out or on a stop, with the reason
 * the abandoned-batch metric is labelled by, and `abandoned` follows one grace period later.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { BatchTimeoutError, startBatchBudget } from './batch-budget.ts';
import { StopRequested } from './stop-signals.ts';

describe('startBatchBudget', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('fires at the deadline, then resolves abandoned after the grace', async () => {
    const budget = startBatchBudget({ budgetMs: 1000, graceMs: 200, stops: [] });
    let abandoned: string | undefined;
    void budget.abandoned.then((reason) => {
      abandoned = reason;
    });
    expect(budget.deadline).toBe(Date.now() + 1000);
    await vi.advanceTimersByTimeAsync(999);
    expect(budget.signal.aborted).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(budget.signal.aborted).toBe(true);
    expect(budget.signal.reason).toBeInstanceOf(BatchTimeoutError);
    expect(budget.reason).toBe('timeout');
    await vi.advanceTimersByTimeAsync(199);
    expect(abandoned).toBeUndefined();
    await vi.advanceTimersByTimeAsync(1);
    expect(abandoned).toBe('timeout');
    budget.dispose();
  });

  it('fires on a stop, naming pause, cancel or shutdown, and only once', async () => {
    const stop = new AbortController();
    const shutdown = new AbortController();
    const budget = startBatchBudget({ budgetMs: 60_000, graceMs: 100, stops: [stop.signal, shutdown.signal] });
    stop.abort(new StopRequested('cancelled'));
    shutdown.abort(new StopRequested('shutdown'));
    expect(budget.signal.aborted).toBe(true);
    expect(budget.reason).toBe('cancelled');
    await vi.advanceTimersByTimeAsync(100);
    await expect(budget.abandoned).resolves.toBe('cancelled');
    budget.dispose();
  });

  it('takes a stop that came before it started, and labels an unknown one "stopped"', () => {
    const stop = new AbortController();
    stop.abort(new Error('who knows'));
    const budget = startBatchBudget({ budgetMs: 60_000, graceMs: 100, stops: [stop.signal, undefined] });
    expect(budget.reason).toBe('stopped');
    budget.dispose();
  });

  it('once disposed, neither fires nor abandons', async () => {
    const stop = new AbortController();
    const budget = startBatchBudget({ budgetMs: 50, graceMs: 50, stops: [stop.signal] });
    let abandoned = false;
    void budget.abandoned.then(() => {
      abandoned = true;
    });
    budget.dispose();
    stop.abort(new StopRequested('paused'));
    await vi.advanceTimersByTimeAsync(1000);
    expect(budget.signal.aborted).toBe(false);
    expect(abandoned).toBe(false);
  });
});
