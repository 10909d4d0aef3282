/**
 * Where opspad's log lines go: this process's stdout, through a byte cap, never blocking the event
 * loop and never throwing into it.
 *
 * Why not pino's default destination: it is sonic-boom on fd 1, and fd 1 is a non-blocking pipe
 * more often than not (libuv sets O_NONBLOCK when `process.stdout` is created). When the reader
 * stalls, unwritten lines pile up in memory without limit; and at exit pino calls sonic-boom's
 * `flushSync`, which answers any write error (EAGAIN from a full pipe, EPIPE from a reader that
 * has gone) by sleeping 100 ms in `Atomics.wait` and trying again, forever. The process then sits
 * on a futex: no HTTP, no timers, no signal handlers — only SIGKILL ends it.
 *
 * Here lines go through Node's own stdout stream (for a pipe, libuv writes without blocking and
 * queues what the pipe cannot take). Past {@link LOG_QUEUE_MAX_BYTES} queued, new lines are
 * dropped and counted (`opspad_log_lines_dropped_total`) until the reader catches up; then one
 * line says how many were lost. Once stdout is closed (EPIPE), every later line is dropped and
 * counted. Each of these is said once on stderr. Terminals and files are written as Node writes
 * them (synchronously); neither fills up the way a pipe does.
 */
import { createRequire } from 'node:module';
import { hostname } from 'node:os';

/** Bytes of log lines that may wait for a slow stdout reader before new lines are dropped. */
export const LOG_QUEUE_MAX_BYTES = 1024 * 1024;
const FLUSH_POLL_MS = 10;
/** At exit, a stdout reader that has taken nothing for this long is not waited for. */
const FLUSH_STALL_MS = 1000;

/** The part of a Writable the sink uses (process.stdout in production, a test double otherwise). */
export interface LogOutput {
  write(chunk: string): boolean;
  readonly writableLength: number;
  once(event: 'drain', listener: () => void): unknown;
  on(event: 'error', listener: (error: Error) => void): unknown;
}

export interface LogSink {
  /** Writes one line, or drops it (counted) while the output is closed or too far behind. */
  write(line: string): void;
  /** Lines dropped since the process started. */
  readonly droppedLines: number;
  /** Bytes written but not yet taken by the reader. */
  readonly queuedBytes: number;
  /**
   * Resolves true once the reader has taken every queued byte; false after `timeoutMs`, or
   * sooner when the reader has taken nothing for a second.
   */
  flush(timeoutMs: number): Promise<boolean>;
}

export interface LogSinkOptions {
  maxQueuedBytes?: number;
  /** Says something once to a human (stderr). Must not throw. */
  notice?: (message: string) => void;
  /** Turns a JSON log line into what is written (pino-pretty on a terminal). */
  format?: (line: string) => string;
}

/** The line written after a gap, in pino's JSON shape so log pipelines parse it like any other. */
function gapLine(dropped: number): string {
  return `${JSON.stringify({
    level: 40,
    time: Date.now(),
    pid: process.pid,
    hostname: hostname(),
    name: 'opspad',
    dropped_lines: dropped,
    msg: 'log lines were dropped: stdout was not being read',
  })}\n`;
}

export function createLogSink(output: LogOutput, options: LogSinkOptions = {}): LogSink {
  const maxQueued = options.maxQueuedBytes ?? LOG_QUEUE_MAX_BYTES;
  const notice = options.notice ?? (() => {});
  const format = options.format ?? ((line: string) => line);
  let dropped = 0;
  let droppedInGap = 0;
  let waitingForDrain = false;
  let closed = false;
  let stallNoticed = false;

  const send = (text: string) => {
    try {
      output.write(text);
    } catch {
      // A destroyed stream may throw synchronously; logging must never throw into its caller.
      closed = true;
    }
  };

  output.on('error', (error) => {
    if (!closed) {
      closed = true;
      notice(
        `stdout is closed (${(error as NodeJS.ErrnoException).code ?? error.message}): log lines are dropped from now on (counted in opspad_log_lines_dropped_total)`,
      );
    }
  });

  const onDrain = () => {
    waitingForDrain = false;
    if (droppedInGap > 0 && !closed) {
      const count = droppedInGap;
      droppedInGap = 0;
      send(format(gapLine(count)));
    }
  };

  return {
    write(line) {
      if (closed) {
        dropped++;
        return;
      }
      const text = format(line);
      if (output.writableLength + Buffer.byteLength(text) > maxQueued) {
        dropped++;
        droppedInGap++;
        if (!waitingForDrain) {
          waitingForDrain = true;
          output.once('drain', onDrain);
        }
        if (!stallNoticed) {
          stallNoticed = true;
          notice(
            `stdout is not being read: log lines beyond ${maxQueued} queued bytes are dropped until it is (counted in opspad_log_lines_dropped_total)`,
          );
        }
        return;
      }
      send(text);
    },
    get droppedLines() {
      return dropped;
    },
    get queuedBytes() {
      return closed ? 0 : output.writableLength;
    },
    flush(timeoutMs) {
      // Polled: 'drain' only comes after a write that returned false, so a short queue may
      // empty without one. A reader that takes nothing for FLUSH_STALL_MS is not waited for.
      const deadline = Date.now() + timeoutMs;
      let last = output.writableLength;
      let progressAt = Date.now();
      return new Promise((resolve) => {
        const check = () => {
          const queued = output.writableLength;
          const now = Date.now();
          if (queued < last) {
            last = queued;
            progressAt = now;
          }
          if (closed || queued === 0) {
            resolve(true);
          } else if (now >= deadline || now - progressAt >= FLUSH_STALL_MS) {
            resolve(false);
          } else {
            setTimeout(check, FLUSH_POLL_MS);
          }
        };
        check();
      });
    },
  };
}

let stdoutSink: LogSink | undefined;

/** Writes one line to stderr; a closed or stalled stderr loses it rather than stopping us. */
export function writeStderr(message: string): void {
  try {
    process.stderr.write(`${message}\n`);
  } catch {
    // Nothing else can be told.
  }
}

/**
 * The process's one stdout sink: every logger shares it, so one cap and one count cover all
 * lines. Creating it also keeps an EPIPE on stdout or stderr from becoming an uncaught exception.
 */
export function stdoutLogSink(): LogSink {
  if (!stdoutSink) {
    process.stderr.on('error', () => {});
    stdoutSink = createLogSink(process.stdout, {
      notice: (message) => writeStderr(`opspad: ${message}`),
      format: process.stdout.isTTY === true ? prettyFormatter() : undefined,
    });
  }
  return stdoutSink;
}

/** Lines the stdout sink has dropped (0 before any logger exists). */
export function droppedLogLines(): number {
  return stdoutSink?.droppedLines ?? 0;
}

/**
 * Human-readable lines for a terminal, formatted on this thread: a pino transport would run in
 * a worker thread whose exit-time flush waits on the terminal, the very wait this module avoids.
 */
function prettyFormatter(): (line: string) => string {
  // Loaded only for a terminal: servers writing JSON never pay for it.
  const { prettyFactory } = createRequire(import.meta.url)('pino-pretty') as typeof import('pino-pretty');
  const pretty = prettyFactory({ colorize: true, ignore: 'pid,hostname' });
  return (line) => pretty(line);
}
