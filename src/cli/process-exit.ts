/**
 * How a long-running `opspad` process ends: on SIGINT or SIGTERM it runs its shutdown steps
 * within one bound (OPSPAD_SHUTDOWN_TIMEOUT, counted from the signal), then exits — whatever the
 * steps or its output do.
 *
 * The handlers are installed before start-up, not after it: between "workers started" and the
 * end of start-up a signal would otherwise meet Node's default action and kill the process in
 * the middle of things. A signal during start-up is acted on as soon as start-up ends; a start-up
 * that does not end within the bound is given up on like any other step ("start-up").
 *
 * Exit codes: 0 stopped cleanly; 1 a step failed (logged) but everything was closed;
 * 3 the bound passed, with one line on stderr naming the step still pending, in the shape of
 * every failure (failure.ts; the process then exits with that step's connections still open:
 * exiting closes them); 128 + the signal's number (130 for SIGINT, 143 for SIGTERM) when a second
 * signal cuts the shutdown short.
 */
import { constants } from 'node:os';
import { stdoutLogSink, writeStderr } from '../log-sink.ts';
import type { Logger } from '../logger.ts';
import { runShutdown, type ShutdownStep } from '../shutdown.ts';
import { EXIT_CODES, failureText } from './failure.ts';

/** What a second signal names while start-up has not ended. */
const START_UP = 'start-up';

export interface ExitOptions {
  /** `opspad start`: what the lines on stderr begin with. */
  command: string;
  logger: Logger;
  /** The bound, counted from the signal (or from the call, without one). */
  timeoutMs: number;
}

/** The step being closed, for a second signal to name. */
const progress: { step: string } = { step: START_UP };
let exiting: Promise<never> | undefined;

function giveUp(command: string, step: string, timeoutMs: number): never {
  writeStderr(
    failureText(
      command,
      `shutdown gave up after ${timeoutMs} ms waiting for "${step}" (exit code ${EXIT_CODES.shutdownTimedOut})`,
      `Its connections close as the process exits; if "${step}" needs longer, raise OPSPAD_SHUTDOWN_TIMEOUT`,
    ).trimEnd(),
  );
  return process.exit(EXIT_CODES.shutdownTimedOut);
}

/**
 * Runs `steps` within what is left of the bound since `since`, then exits the process (never
 * resolves). Called again while a shutdown is under way, it joins that one.
 */
export function shutdownAndExit(
  steps: readonly ShutdownStep[],
  options: ExitOptions & { exitCode?: number; since?: number },
): Promise<never> {
  exiting ??= (async () => {
    const since = options.since ?? Date.now();
    const report = await runShutdown(steps, {
      timeoutMs: Math.max(0, options.timeoutMs - (Date.now() - since)),
      logger: options.logger,
      onStep: (name) => {
        progress.step = name;
      },
    });
    if (report.stuck) {
      return giveUp(options.command, report.stuck, options.timeoutMs);
    }
    const code = report.failed.length > 0 ? EXIT_CODES.stepFailed : (options.exitCode ?? EXIT_CODES.ok);
    options.logger.info({ exit_code: code, elapsed_ms: Date.now() - since }, 'stopped');
    // What is left of the bound goes to a slow stdout reader; a stalled one gets nothing more.
    const sink = stdoutLogSink();
    const flushed = await sink.flush(Math.max(0, options.timeoutMs - (Date.now() - since)));
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

export interface SignalHandling {
  /** Start-up is over: a signal now runs `steps`; one that came during start-up runs them now. */
  started(steps: readonly ShutdownStep[]): void;
}

/**
 * From now on, the first SIGINT or SIGTERM shuts down gracefully within the bound and exits; a
 * second one exits at once, naming the step it did not wait for.
 */
export function exitOnSignals(options: ExitOptions): SignalHandling {
  let steps: readonly ShutdownStep[] | undefined;
  let signalledAt: number | undefined;
  let startUpBound: NodeJS.Timeout | undefined;
  const stop = (ready: readonly ShutdownStep[]) => void shutdownAndExit(ready, { ...options, since: signalledAt });

  const onSignal = (signal: NodeJS.Signals) => {
    if (signalledAt !== undefined) {
      writeStderr(`${options.command}: second ${signal}: exiting now without waiting for "${progress.step}"`);
      process.exit(128 + (constants.signals[signal] ?? 0));
    }
    signalledAt = Date.now();
    options.logger.info(
      { signal, timeout_ms: options.timeoutMs },
      steps ? 'shutting down: finishing the batches in flight' : 'shutting down once start-up is over',
    );
    if (steps) {
      stop(steps);
    } else {
      // Unref'd: a start-up that fails lets the process exit with its own code.
      startUpBound = setTimeout(() => giveUp(options.command, START_UP, options.timeoutMs), options.timeoutMs).unref();
    }
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  return {
    started(ready) {
      steps = ready;
      if (signalledAt !== undefined) {
        clearTimeout(startUpBound);
        stop(ready);
      }
    },
  };
}
