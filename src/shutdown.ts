/**
 * Shutdown as a list of named steps run in order, with one bound for all of them.
 *
 * A step that throws is logged and the next one runs: a failed close must not keep the rest
 * open. A step that never ends (a handler ignoring its abort signal, a Redis that stopped
 * answering) is not waited for past the bound: the report names it, every step not yet done is
 * forced (best effort: drop connections rather than wait for them), and the caller decides what
 * to do — the CLI exits non-zero with a line naming the step, an embedder's `close()` rejects
 * with a {@link ShutdownTimeoutError}.
 */
import type { Logger } from './logger.ts';

export interface ShutdownStep {
  /** What an operator reads in "gave up waiting for …": `HTTP server`, `workers`, `database`. */
  readonly name: string;
  run(): Promise<unknown>;
  /**
   * Called, synchronously and at most once, when the bound passes before this step is done
   * (whether it is running or has not started): close at once whatever `run` would wait for.
   */
  force?(): void;
}

export interface ShutdownReport {
  /** The step still running when the bound passed; the ones after it never started. */
  stuck?: string;
  /** Steps that threw (the shutdown went on with the next). */
  failed: string[];
  elapsedMs: number;
}

export interface ShutdownOptions {
  timeoutMs: number;
  logger: Logger;
  /** Told the name of each step as it starts (a second signal names the one in progress). */
  onStep?: (name: string) => void;
}

/** Thrown by an embedded opspad's `close()` when a step outlived the bound. */
export class ShutdownTimeoutError extends Error {
  override readonly name = 'ShutdownTimeoutError';
  readonly code = 'shutdown_timeout';
  constructor(
    readonly step: string,
    readonly timeoutMs: number,
  ) {
    super(`shutdown gave up after ${timeoutMs} ms waiting for "${step}"`);
  }
}

/** Runs `steps` in order; resolves by `timeoutMs` at the latest, whatever the steps do. */
export async function runShutdown(steps: readonly ShutdownStep[], options: ShutdownOptions): Promise<ShutdownReport> {
  const started = performance.now();
  const failed: string[] = [];
  let next = 0;
  let current: string | undefined;
  let abandoned = false;

  const sequence = (async () => {
    for (; next < steps.length && !abandoned; next++) {
      const step = steps[next] as ShutdownStep;
      current = step.name;
      options.onStep?.(step.name);
      try {
        await step.run();
      } catch (error) {
        failed.push(step.name);
        options.logger.error({ err: error, step: step.name }, `shutdown: closing the ${step.name} failed`);
      }
    }
    current = undefined;
  })();

  let timer: NodeJS.Timeout | undefined;
  const bound = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), options.timeoutMs);
  });
  const outcome = await Promise.race([sequence.then(() => 'done' as const), bound]);
  clearTimeout(timer);
  const elapsedMs = Math.round(performance.now() - started);
  if (outcome === 'done' || current === undefined) {
    return { failed, elapsedMs };
  }
  abandoned = true;
  const stuck = current;
  for (const step of steps.slice(next)) {
    try {
      step.force?.();
    } catch {
      // Forcing is best effort; the caller is about to give up on these steps anyway.
    }
  }
  return { stuck, failed, elapsedMs };
}
