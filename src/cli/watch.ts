/**
 * `opspad ops watch <operation_id>`: follows an operation's server-sent events and draws a live
 * progress bar (done/total, failed, rate, ETA) until the operation ends, then says why it stopped
 * following: the operation finished, went idle, the server is shutting down, or Ctrl-C.
 */
import { errorOf } from '../client/http.ts';
import { parseServerSentEvents } from '../client/sse.ts';
import { isFinished } from '../domain/operation.ts';
import { OperationProgress } from '../domain/operation-output.ts';
import { ProblemError } from '../domain/problem-error.ts';
import { CommandError } from './failure.ts';

const BAR_WIDTH = 30;

function duration(seconds: number): string {
  if (!Number.isFinite(seconds)) {
    return '--';
  }
  const s = Math.round(seconds);
  return s >= 3600
    ? `${Math.floor(s / 3600)}h${Math.floor((s % 3600) / 60)}m`
    : s >= 60
      ? `${Math.floor(s / 60)}m${s % 60}s`
      : `${s}s`;
}

/** One line describing the operation; `rate` in items per second. */
export function progressLine(progress: OperationProgress, rate: number): string {
  const done = progress.completed_count + progress.failed_count;
  const ratio = progress.total_items === 0 ? 1 : done / progress.total_items;
  const filled = Math.round(ratio * BAR_WIDTH);
  const bar = `${'█'.repeat(filled)}${'░'.repeat(BAR_WIDTH - filled)}`;
  const eta = rate > 0 ? duration(progress.remaining_count / rate) : '--';
  const paused = progress.status === 'paused' && progress.paused_reason ? ` (${progress.paused_reason})` : '';
  return `${bar} ${done}/${progress.total_items} ${(ratio * 100).toFixed(1)}% · ${progress.failed_count} failed · ${rate.toFixed(0)}/s · ETA ${eta} · ${progress.status}${paused}`;
}

export interface WatchOptions {
  baseUrl: string;
  apiKey: string;
  operationId: string;
  out: NodeJS.WriteStream;
  /** Aborted (Ctrl-C): stop following; the operation itself goes on. */
  signal?: AbortSignal;
}

/**
 * Why following stopped: the stream's own `end` reasons (finished, idle, shutting_down), the
 * caller's abort (interrupted), or a stream that closed without saying why (closed).
 */
export type WatchEnd = 'finished' | 'idle' | 'shutting_down' | 'interrupted' | 'closed';

export interface WatchResult {
  /** The last progress seen (none when the stream ended before the first). */
  progress: OperationProgress | undefined;
  end: WatchEnd;
  /** The `end` event's message, when there was one. */
  message?: string;
}

/** What to say when opspad at `baseUrl` does not answer. */
export function noAnswerProblem(baseUrl: string, error: unknown): ProblemError {
  const cause = (error as { cause?: { message?: unknown } } | null)?.cause?.message ?? (error as Error).message;
  return new ProblemError(
    `no opspad answers at ${baseUrl} (${String(cause)})`,
    'Start it (`opspad start`), or point --url or OPSPAD_URL at where it runs',
    { cause: error },
  );
}

/** What to say when opspad refused `what`: its own message says what to do. */
export async function refusedProblem(baseUrl: string, what: string, response: Response): Promise<ProblemError> {
  const error = await errorOf(response);
  if (error.code === 'unauthorized') {
    return new ProblemError(
      `opspad at ${baseUrl} refused the API key (--key or OPSPAD_API_KEY): ${error.message}`,
      'Give a key of the organization the operation belongs to; `opspad keys create --org <name>` makes one',
    );
  }
  if (error.code === 'invalid_response') {
    return new ProblemError(
      `${baseUrl} answered ${what} with something that is not opspad's (${error.message})`,
      'Point --url or OPSPAD_URL at the opspad API',
    );
  }
  return new ProblemError(`opspad at ${baseUrl} refused ${what} (${response.status} ${error.code})`, error.message);
}

const ENDS: ReadonlySet<string> = new Set(['finished', 'idle', 'shutting_down']);

/** Follows the operation until its stream ends, drawing the bar; throws a ProblemError when it cannot. */
export async function watchOperation(options: WatchOptions): Promise<WatchResult> {
  const { baseUrl, operationId } = options;
  let response: Response;
  try {
    response = await fetch(`${baseUrl}/v1/operations/${encodeURIComponent(operationId)}/events`, {
      headers: { authorization: `Bearer ${options.apiKey}`, accept: 'text/event-stream' },
      signal: options.signal,
    });
  } catch (error) {
    if (options.signal?.aborted) {
      return { progress: undefined, end: 'interrupted' };
    }
    throw noAnswerProblem(baseUrl, error);
  }
  if (!response.ok || !response.body) {
    throw await refusedProblem(baseUrl, `the events of operation ${operationId}`, response);
  }
  const tty = options.out.isTTY === true;
  const samples: { at: number; done: number }[] = [];
  let last: OperationProgress | undefined;
  let shown = '';
  let held: string | undefined;
  const draw = (line: string) => options.out.write(tty ? `\r\x1b[2K${line}` : `${line}\n`);
  const result = (end: WatchEnd, message?: string): WatchResult => {
    if (held) {
      draw(held);
    }
    if (tty && (shown || held)) {
      options.out.write('\n');
    }
    return { progress: last, end, ...(message ? { message } : {}) };
  };
  try {
    for await (const { event, data } of parseServerSentEvents(response.body)) {
      if (event !== 'progress' && event !== 'end') {
        continue;
      }
      const parsed = JSON.parse(data) as { reason?: unknown; message?: unknown } | null;
      if (event === 'end' && !OperationProgress.safeParse(parsed).success) {
        // An end without progress: the key was revoked.
        throw new ProblemError(
          `the stream of operation ${operationId} ended: ${String(parsed?.message ?? parsed?.reason ?? 'no reason given')}`,
          `Follow it again with a valid key (--key or OPSPAD_API_KEY): \`opspad ops watch ${operationId}\``,
        );
      }
      last = OperationProgress.parse(parsed);
      const done = last.completed_count + last.failed_count;
      samples.push({ at: Date.now(), done });
      // Rate over the last ~10 s of samples.
      while (samples.length > 2 && (samples[0]?.at ?? 0) < Date.now() - 10_000) {
        samples.shift();
      }
      const first = samples[0];
      const elapsed = first ? (Date.now() - first.at) / 1000 : 0;
      const rate = first && elapsed > 0 ? (done - first.done) / elapsed : 0;
      // A line per change of the counts or the status. All items done but the status not final
      // yet: held back for the status that follows, so the 100 % line is drawn once.
      const state = `${done} ${last.failed_count} ${last.status} ${last.paused_reason}`;
      held = done === last.total_items && !isFinished(last.status) ? progressLine(last, rate) : undefined;
      if (state !== shown && !held) {
        draw(progressLine(last, rate));
        shown = state;
      }
      if (event === 'end') {
        const reason = String(parsed?.reason);
        return result(ENDS.has(reason) ? (reason as WatchEnd) : 'closed', String(parsed?.message ?? ''));
      }
    }
  } catch (error) {
    if (options.signal?.aborted) {
      return result('interrupted');
    }
    // fetch reports a connection that broke mid-stream (the server went away) as a TypeError.
    if (error instanceof TypeError) {
      return result('closed', error.message);
    }
    throw error;
  }
  return result('closed');
}

/** An abort signal Ctrl-C (SIGINT) or SIGTERM fires, for as long as the caller follows. */
export function abortOnSignals(): { signal: AbortSignal; dispose(): void } {
  const controller = new AbortController();
  const abort = () => {
    dispose();
    controller.abort();
  };
  const dispose = () => {
    process.off('SIGINT', abort);
    process.off('SIGTERM', abort);
  };
  process.once('SIGINT', abort);
  process.once('SIGTERM', abort);
  return { signal: controller.signal, dispose };
}

/** "1,234 of 3,000 items done": how far the operation got. */
export function howFar(progress: OperationProgress | undefined): string {
  if (!progress) {
    return 'progress unknown';
  }
  const done = progress.completed_count + progress.failed_count;
  return `${progress.status}, ${done.toLocaleString('en-US')} of ${progress.total_items.toLocaleString('en-US')} items done`;
}

/**
 * The failure of a stream that ended before its operation did (idle, the server shutting down,
 * a broken connection), saying how to follow it again; undefined when it did not.
 */
export function stoppedEarly(
  watched: WatchResult,
  where: { operationId: string; baseUrl: string; followAgain: string },
): CommandError | undefined {
  const { operationId, baseUrl, followAgain } = where;
  switch (watched.end) {
    case 'idle':
      return new CommandError(
        `operation ${operationId} is ${howFar(watched.progress)}, and nothing happened on it for the server's OPSPAD_STREAM_IDLE_TIMEOUT`,
        `Resume it, or follow it again: ${followAgain}`,
      );
    case 'shutting_down':
      return new CommandError(
        `opspad at ${baseUrl} is shutting down; operation ${operationId} was left ${howFar(watched.progress)}`,
        `Follow it again once opspad is back: ${followAgain}`,
      );
    case 'closed':
      return new CommandError(
        `the event stream of operation ${operationId} at ${baseUrl} ended before the operation did${watched.message ? ` (${watched.message})` : ''}`,
        `Follow it again: ${followAgain}`,
      );
    default:
      return undefined;
  }
}
