/**
 * Start-up as a list of named steps. Each step that opens something (a database pool, a queue
 * backend's connections, a listening socket, workers, a timer) registers how to close it; when a
 * later step throws, everything opened so far is closed in reverse order, within the shutdown
 * bound, and start-up rejects with a {@link StartFailedError} naming the step. An embedding app
 * then fails instead of hanging on open handles, and `opspad start` exits with that one line.
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
  /** Bound on closing what was opened, after a step failed. */
  timeoutMs: number;
  /** Called before each step; a test throws from it to fail that step. */
  beforeStep?: (step: Name) => void | Promise<void>;
}

export interface StartSequence<Name extends string = string> {
  /**
   * Runs the step `name`. `close`, given what `open` returned, says how to close it should a
   * later step fail. A {@link StartFailedError} thrown inside (a nested start) keeps its step.
   */
  step<T>(name: Name, open: () => T | Promise<T>, close?: (opened: T) => ShutdownStep['run']): Promise<T>;
}

export function startSequence<Name extends string>(options: StartSequenceOptions<Name>): StartSequence<Name> {
  const opened: ShutdownStep[] = [];

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
    async step(name, open, close) {
      try {
        await options.beforeStep?.(name);
        const value = await open();
        if (close) {
          opened.push({ name, run: close(value) });
        }
        return value;
      } catch (error) {
        await unwind(name);
        throw error instanceof StartFailedError ? error : new StartFailedError(name, error);
      }
    },
  };
}
