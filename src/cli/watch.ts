/**
 * `opspad ops watch <operation_id>`: follows an operation's server-sent events and draws a live
 * progress bar (done/total, failed, rate, ETA) until the operation ends.
 */
import { parseServerSentEvents } from '../client/sse.ts';
import { OperationProgress } from '../domain/operation-output.ts';

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
}

/** Returns the final progress when the operation ends (or the stream closes). */
export async function watchOperation(options: WatchOptions): Promise<OperationProgress | undefined> {
  const response = await fetch(`${options.baseUrl}/v1/operations/${options.operationId}/events`, {
    headers: { authorization: `Bearer ${options.apiKey}`, accept: 'text/event-stream' },
  });
  if (!response.ok || !response.body) {
    const text = await response.text();
    throw new Error(`${response.status}: ${text}`);
  }
  const tty = options.out.isTTY === true;
  const samples: { at: number; done: number }[] = [];
  let last: OperationProgress | undefined;
  let lastLine = '';
  for await (const { event, data } of parseServerSentEvents(response.body)) {
    if (event !== 'progress' && event !== 'end') {
      continue;
    }
    const parsed: unknown = JSON.parse(data);
    if (event === 'end' && !OperationProgress.safeParse(parsed).success) {
      // An end without progress (the key was revoked): say why the stream stopped.
      throw new Error(String((parsed as { message?: unknown } | null)?.message ?? 'the event stream ended'));
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
    const line = progressLine(last, rate);
    if (line !== lastLine) {
      options.out.write(tty ? `\r\x1b[2K${line}` : `${line}\n`);
      lastLine = line;
    }
    if (event === 'end') {
      break;
    }
  }
  if (tty) {
    options.out.write('\n');
  }
  return last;
}
