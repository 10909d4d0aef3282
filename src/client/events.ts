/**
 * `client.operations.events(id)`: an operation's event stream as an async iterator of typed
 * events, ending after `end`. A stream that closes before `end` (a server restart, a proxy's
 * idle timeout, the server shutting down) is opened again with `Last-Event-ID`, so no audit
 * event is missed or repeated; giving up after `maxReconnects` attempts in a row that bring
 * nothing. Breaking out of the loop closes the connection.
 */
import type { OperationAuditEvent, OperationProgress } from '../domain/operation-output.ts';
import { OpspadError } from './errors.ts';
import { segment, type Transport } from './http.ts';
import { parseServerSentEvents } from './sse.ts';

/** The audit-trail event kinds (see OperationAuditEvent in /openapi.json). */
export type OperationEventKind =
  | 'created'
  | 'batch_leased'
  | 'batch_recorded'
  | 'lease_expired'
  | 'paused'
  | 'resumed'
  | 'completed'
  | 'cancelled'
  | 'expired'
  | 'retried';

export type OperationStreamEvent =
  /** Counts or status changed. */
  | { event: 'progress'; data: OperationProgress }
  /** The operation is completed or cancelled: the last event. */
  | { event: 'end'; data: OperationProgress }
  /** An audit-trail entry; `id` orders them. */
  | { event: OperationEventKind; id: number; data: OperationAuditEvent };

export interface EventsOptions {
  signal?: AbortSignal;
  /** Start after this audit event id (from an earlier stream). */
  lastEventId?: number;
  /** Open the stream again when it closes before `end` (default true). */
  reconnect?: boolean;
  /** Wait before opening it again (default 1000 ms, or what the server asks with `retry:`). */
  reconnectDelayMs?: number;
  /** Attempts in a row that bring no event before giving up (default 5). */
  maxReconnects?: number;
}

function wait(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

function typed(event: string, data: string, id: string | undefined): OperationStreamEvent | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(data);
  } catch {
    return undefined;
  }
  if (event === 'progress' || event === 'end') {
    return { event, data: parsed as OperationProgress };
  }
  const numericId = Number(id);
  if (id === undefined || !Number.isSafeInteger(numericId)) {
    return undefined;
  }
  return { event: event as OperationEventKind, id: numericId, data: parsed as OperationAuditEvent };
}

export async function* operationEvents(
  transport: Transport,
  operationId: string,
  options: EventsOptions = {},
): AsyncGenerator<OperationStreamEvent, void, undefined> {
  const reconnect = options.reconnect ?? true;
  const maxReconnects = options.maxReconnects ?? 5;
  let delayMs = options.reconnectDelayMs ?? 1000;
  let lastEventId = options.lastEventId;
  let fruitless = 0;
  for (;;) {
    let received = false;
    try {
      const response = await transport.stream({
        method: 'GET',
        path: `/v1/operations/${segment(operationId)}/events`,
        headers: lastEventId === undefined ? {} : { 'last-event-id': String(lastEventId) },
        signal: options.signal,
      });
      const body = response.body as ReadableStream<Uint8Array>;
      try {
        for await (const frame of parseServerSentEvents(body)) {
          if (frame.retry !== undefined) {
            delayMs = frame.retry;
          }
          const event = typed(frame.event, frame.data, frame.id);
          if (!event) {
            continue;
          }
          received = true;
          fruitless = 0;
          if ('id' in event) {
            lastEventId = event.id;
          }
          yield event;
          if (event.event === 'end') {
            return;
          }
        }
      } finally {
        await body.cancel().catch(() => {});
      }
    } catch (error) {
      // The caller's abort and the server's refusals (404, 401, …) end the iteration; a lost
      // connection is retried like a stream that closed.
      if (options.signal?.aborted) {
        throw options.signal.reason ?? error;
      }
      const lost = error instanceof OpspadError ? error.status === 0 : error instanceof TypeError;
      if (!lost) {
        throw error;
      }
    }
    if (!received) {
      fruitless += 1;
    }
    if (!reconnect || fruitless > maxReconnects) {
      throw new OpspadError('network_error', `the event stream of operation ${operationId} closed before its end`, {
        status: 0,
        details: { operation_id: operationId, last_event_id: lastEventId ?? null },
      });
    }
    await wait(delayMs, options.signal);
  }
}
