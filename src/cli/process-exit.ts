/**
 * How a long-running `opspad` process ends: on SIGINT or SIGTERM it runs its shutdown steps
 * within one bound (OPSPAD_SHUTDOWN_TIMEOUT), then exits — whatever the steps or its output do.
 *
 * Exit codes: 0 stopped cleanly; 1 a step failed (logged) but everything was closed;
 * 3 the bound passed, with one line on stderr naming the step still pending (the process then
 * exits with that step's connections still open: exiting closes them); 128 + the signal's number
 * (130 for SIGINT, 143 for SIGTERM) when a second signal cuts the shutdown short.
 */
import { constants } from 'node:os';
import { stdoutLogSink, writeStderr } from '../log-sink.ts';
import type { Logger } from '../logger.ts';
import { runShutdown, type ShutdownStep } from '../shutdown.ts';

export const EXIT_CODES = { ok: 0, stepFailed: 1, usage: 2, shutdownTimedOut: 3 } as const;

export interface ExitOptions {
  logger: Logger;
  timeoutMs: number;
}

/** The step being closed, for a second signal to name; undefined until shutdown begins. */
let progress: { step: string | undefined } | undefined;
let exiting: Promise<never> | undefined;

/**
 * Runs `steps` within the bound, then exits the process (never resolves). Called again while
 * a shutdown is under way, it joins that one.
 */
export function shutdownAndExit(
  steps: readonly ShutdownStep[],
  options: ExitOptions & { exitCode?: number },
): Promise<never> {
  exiting ??= (async () => {
    const state = { step: undefined as string | undefined };
    progress = state;
    const report = await runShutdown(steps, {
      timeoutMs: options.timeoutMs,
      logger: options.logger,
      onStep: (name) => {
        state.step = name;
      },
    });
    if (report.stuck) {
      writeStderr(
        `opspad: shutdown gave up after ${options.timeoutMs} ms waiting for "${report.stuck}" (exit code ${EXIT_CODES.shutdownTimedOut})`,
      );
      return process.exit(EXIT_CODES.shutdownTimedOut);
    }
    const code = report.failed.length > 0 ? EXIT_CODES.stepFailed : (options.exitCode ?? EXIT_CODES.ok);
    options.logger.info({ exit_code: code, elapsed_ms: report.elapsedMs }, 'stopped');
    // What is left of the bound goes to a slow stdout reader; a stalled one gets nothing more.
    const sink = stdoutLogSink();
    const flushed = await sink.flush(Math.max(0, options.timeoutMs - report.elapsedMs));
    if (!flushed) {
      writeStderr(`opspad: exiting with ${sink.queuedBytes} bytes of log lines stdout has not taken`);
    }
    if (sink.droppedLines > 0) {
      writeStderr(`opspad: ${sink.droppedLines} log lines were dropped while stdout was not being read`);
    }
    return process.exit(code);
  })();
  return exiting;
}

/** The shutdown under way (it ends the process), if one is. */
export function shutdownInProgress(): Promise<never> | undefined {
  return exiting;
}

/**
 * On the first SIGINT or SIGTERM, shuts down gracefully within the bound and exits; a second
 * one exits at once, naming the step it did not wait for.
 */
export function exitOnSignals(steps: readonly ShutdownStep[], options: ExitOptions): void {
  const onSignal = (signal: NodeJS.Signals) => {
    if (progress) {
      const pending = progress.step ? ` without waiting for "${progress.step}"` : '';
      writeStderr(`opspad: second ${signal}: exiting now${pending}`);
      process.exit(128 + (constants.signals[signal] ?? 0));
    }
    options.logger.info({ signal, timeout_ms: options.timeoutMs }, 'shutting down: finishing the batches in flight');
    void shutdownAndExit(steps, options);
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
}

/**
 * Holds SIGINT and SIGTERM while a process starts: its first log lines are out before its
 * shutdown steps exist, and a supervisor that reads them may already send a signal. A held
 * signal is acted on once `started` hands over the steps; a start still running one bound after
 * the signal exits with code 3.
 */
export function holdSignalsDuringStart(options: ExitOptions): {
  started(steps: readonly ShutdownStep[]): void;
  release(): void;
} {
  let held: NodeJS.Signals | undefined;
  let giveUp: NodeJS.Timeout | undefined;
  const hold = (signal: NodeJS.Signals) => {
    held ??= signal;
    giveUp ??= setTimeout(() => {
      writeStderr(
        `opspad: ${signal} during start-up, and start-up did not end within ${options.timeoutMs} ms (exit code ${EXIT_CODES.shutdownTimedOut})`,
      );
      process.exit(EXIT_CODES.shutdownTimedOut);
    }, options.timeoutMs);
  };
  const release = () => {
    process.off('SIGINT', hold);
    process.off('SIGTERM', hold);
    clearTimeout(giveUp);
  };
  process.on('SIGINT', hold);
  process.on('SIGTERM', hold);
  return {
    started(steps) {
      release();
      exitOnSignals(steps, options);
      if (held) {
        process.emit(held, held);
      }
    },
    release,
  };
}
