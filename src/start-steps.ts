/**
 * Start-up as a list of named steps, each declaring once how what it opened is stopped: `close`
 * when a later step fails (everything opened so far is closed in reverse order, within the
 * shutdown bound, and start-up rejects with a {@link StartFailedError} naming the step), and
 * `shutdown` for the graceful shutdown, whose order the caller's step table gives (`stopOrder`:
 * not the reverse of start-up; the API stops taking requests before the workers stop). An
 * embedding app then fails instead of hanging on open handles, and `opspad start` exits with
 * that one line.
 */
import type { Logger } from './logger.ts';
import { runShutdown, type ShutdownStep } from './shutdown.ts';

/**
 * What went wrong, on one line: the first line of the error's message, then of each cause that
 * says more (a driver's "Failed query: …" wraps the server's "permission denied …").
 */
export function describeFailure(error: unknown): string {
  const parts: string[] = [];
  let current: unknown = error;
  for (let depth = 0; depth < 5 && current !== undefined && current !== null; depth++) {
    const message = (current instanceof Error ? current.message : String(current)).split('\n')[0]?.trim() ?? '';
    if (message && !parts.some((part) => part.includes(message))) {
      parts.push(message);
    }
    current = current instanceof Error ? current.cause : undefined;
  }
  return parts.join(': ') || 'unknown error';
}

/** Thrown when start-up fails; whatever it had opened is closed by then. */
export class StartFailedError extends Error {
  override readonly name = 'StartFailedError';
  readonly code = 'start_failed';
  /** The cause, on one line. */
  readonly reason: string;
  constructor(
    /** The step that threw: `database`, `HTTP server`, `workers`, … */
    readonly step: string,
    cause: unknown,
  ) {
    const reason = describeFailure(cause);
    super(`opspad start failed at ${step}: ${reason}`, { cause });
    this.reason = reason;
  }
}

export interface StartSequenceOptions<Name extends string = string> {
  logger: Logger;
  /**
   * Each step's place in the graceful shutdown, lower first (null or absent: it leaves nothing
   * to stop). Only steps that declare a `shutdown` need one.
   */
  stopOrder?: Readonly<Partial<Record<Name, number | null>>>;
  /** Bound on closing what was opened, after a step failed. */
  timeoutMs: number;
  /** Called before each step; a test throws from it to fail that step. */
  beforeStep?: (step: Name) => void | Promise<void>;
}

/** How a step's opened value is stopped; both given what `open` returned. */
export interface StepStops<T> {
  /** Closes it at once should a later start step fail (default: `shutdown`'s run). */
  close?: (opened: T) => ShutdownStep['run'];
  /** Stops it in the graceful shutdown, at the step's place in `stopOrder`. */
  shutdown?: (opened: T) => Omit<ShutdownStep, 'name'>;
}

export interface StartSequence<Name extends string = string> {
  /**
   * Runs the step `name` and records how to stop what it opened. A {@link StartFailedError}
   * thrown inside (a nested start) keeps its step.
   */
  step<T>(name: Name, open: () => T | Promise<T>, stops?: StepStops<T>): Promise<T>;
  /** The graceful shutdown of the steps that ran, in `stopOrder`. */
  shutdownSteps(): ShutdownStep[];
}

export function startSequence<Name extends string>(options: StartSequenceOptions<Name>): StartSequence<Name> {
  const opened: ShutdownStep[] = [];
  const stopping: { order: number; step: ShutdownStep }[] = [];

  const unwind = async (failedAt: Name) => {
    const report = await runShutdown([...opened].reverse(), { timeoutMs: options.timeoutMs, logger: options.logger });
    opened.length = 0;
    if (report.stuck) {
      options.logger.error(
        { step: report.stuck, failed_at: failedAt, timeout_ms: options.timeoutMs },
        `start-up failed at ${failedAt}, and closing the ${report.stuck} did not end within the shutdown bound`,
      );
    }
  };

  return {
    async step(name, open, stops = {}) {
      try {
        const order = options.stopOrder?.[name];
        if (stops.shutdown && (order === undefined || order === null)) {
          throw new Error(`start step ${name} declares a shutdown but has no place in stopOrder`);
        }
        await options.beforeStep?.(name);
        const value = await open();
        const shutdown = stops.shutdown?.(value);
        const close = stops.close?.(value) ?? shutdown?.run;
        if (close) {
          opened.push({ name, run: close });
        }
        if (shutdown) {
          stopping.push({ order: order as number, step: { name, ...shutdown } });
        }
        return value;
      } catch (error) {
        await unwind(name);
        throw error instanceof StartFailedError ? error : new StartFailedError(name, error);
      }
    },
    shutdownSteps() {
      return [...stopping].sort((a, b) => a.order - b.order).map(({ step }) => step);
    },
  };
}
