/**
 * Waiting for things to happen without sleeping for a guessed time: follow an operation's own
 * event stream, or poll a condition in a bounded loop.
 */
import { parseServerSentEvents } from '../../src/client/sse.ts';
import type { OperationProgress } from '../../src/domain/operation-output.ts';
import type { Tenant } from './harness.ts';

/** The data of the stream's `progress` and `end` events. */
export type ProgressEvent = OperationProgress;

/**
 * Follows `GET /v1/operations/:id/events` until a progress (or end) event satisfies `until`;
 * rejects after `timeoutMs`.
 */
export async function waitForProgress(
  baseUrl: string,
  tenant: Tenant,
  operationId: string,
  until: (progress: ProgressEvent) => boolean,
  timeoutMs = 60_000,
): Promise<ProgressEvent> {
  const response = await fetch(`${baseUrl}/v1/operations/${operationId}/events`, {
    headers: { authorization: `Bearer ${tenant.apiKey}` },
    signal: AbortSignal.timeout(timeoutMs),
  });
  if (!response.ok || !response.body) {
    throw new Error(`events stream answered ${response.status}: ${await response.text()}`);
  }
  let last: ProgressEvent | undefined;
  try {
    for await (const { event, data } of parseServerSentEvents(response.body)) {
      if (event === 'progress' || event === 'end') {
        last = JSON.parse(data) as ProgressEvent;
        if (until(last)) {
          return last;
        }
      }
    }
  } finally {
    await response.body.cancel().catch(() => {});
  }
  throw new Error(`the events stream ended before the condition held; last: ${JSON.stringify(last)}`);
}

export const finished = (p: ProgressEvent) => p.status === 'completed' || p.status === 'cancelled';

/** Polls `check` every `intervalMs` until it returns a value other than undefined. */
export async function eventually<T>(
  check: () => Promise<T | undefined>,
  { timeoutMs = 30_000, intervalMs = 50, what = 'condition' } = {},
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) {
      return value;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    }
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}
