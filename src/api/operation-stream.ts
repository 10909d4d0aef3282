/**
 * `GET /v1/operations/:operationId/events`: an operation's progress as server-sent events. Reads
 * Postgres (the source of truth) every `pollMs`, so it works the same whichever process or
 * machine does the work.
 *
 * Events: `progress` (counts, status) when it changes, one event per audit-trail entry
 * (`batch_recorded`, `paused`, …, with the entry's id as the SSE id, so Last-Event-ID resumes),
 * a `: heartbeat` comment after `heartbeatMs` without a write, and always a last `end` event whose
 * `reason` says why the stream stops:
 * - `finished` — the operation is completed or cancelled (with its final progress);
 * - `idle` — the operation is paused and nothing happened for `idleMs` (with its progress);
 * - `key_revoked` — the API key was revoked (checked every `keyCheckMs`; nothing else is sent);
 * - `shutting_down` — the server is stopping (with the progress; reconnect with Last-Event-ID).
 *
 * A key holds at most `slots.maxPerKey` streams at once, across processes (stream-slots.ts):
 * one more is refused with 429 too_many_streams before any database read.
 */

import { setTimeout as sleep } from 'node:timers/promises';
import type { Request, Response } from 'express';
import { AppError } from '../domain/errors.ts';
import { isFinished } from '../domain/operation.ts';
import type { OperationProgress } from '../domain/operation-output.ts';
import { operationProgressOf } from '../domain/operation-progress.ts';
import {
  type Database,
  getOperationInOrganization,
  isApiKeyActive,
  listEvents,
  type Principal,
} from '../store/index.ts';
import type { StreamSlot, StreamSlots } from './stream-slots.ts';

export interface StreamBounds {
  /** How often the stream reads the database. */
  pollMs: number;
  /** OPSPAD_STREAM_HEARTBEAT */
  heartbeatMs: number;
  /** OPSPAD_STREAM_IDLE_TIMEOUT */
  idleMs: number;
  /** OPSPAD_STREAM_KEY_CHECK */
  keyCheckMs: number;
}

export const STREAM_DEFAULTS: StreamBounds = {
  pollMs: 1000,
  heartbeatMs: 15_000,
  idleMs: 10 * 60_000,
  keyCheckMs: 5_000,
};

export const STREAM_END_REASONS = ['finished', 'idle', 'key_revoked', 'shutting_down'] as const;
export type StreamEndReason = (typeof STREAM_END_REASONS)[number];

export interface OperationStreamDeps {
  db: Database;
  bounds: StreamBounds;
  /** Open streams per key; without it (tests of the app alone), streams are not counted. */
  slots?: StreamSlots;
  /** False once the server is shutting down. */
  accepting: () => boolean;
}

type Snapshot = Awaited<ReturnType<typeof getOperationInOrganization>>;

/** The `progress` event's data (and the `end` event's, but for key_revoked). */
export function progressOf({ operation, counts }: Snapshot): OperationProgress {
  return operationProgressOf(operation, counts);
}

const NOT_COUNTED: StreamSlot = { renew: async () => {}, release: async () => {} };

/**
 * A slot for one more long response of the key (an event stream, a results file), or 429
 * too_many_streams with Retry-After.
 */
export async function takeSlot(deps: OperationStreamDeps, principal: Principal, res: Response): Promise<StreamSlot> {
  if (!deps.slots) {
    return NOT_COUNTED;
  }
  const slot = await deps.slots.acquire(principal.keyId);
  if (slot) {
    return slot;
  }
  // By the next heartbeat, a stream whose client went away without closing has been noticed.
  const retryAfter = Math.max(1, Math.ceil(deps.bounds.heartbeatMs / 1000));
  res.set('Retry-After', String(retryAfter));
  throw new AppError(
    'too_many_streams',
    `This API key already has ${deps.slots.maxPerKey} event streams open (OPSPAD_MAX_STREAMS_PER_KEY). Close one, or retry after ${retryAfter} s.`,
    { limit: deps.slots.maxPerKey, retry_after_seconds: retryAfter },
  );
}

export async function streamOperationEvents(
  deps: OperationStreamDeps,
  req: Request,
  res: Response,
  principal: Principal,
  operationId: string,
): Promise<void> {
  const slot = await takeSlot(deps, principal, res);
  try {
    // Before any byte is sent, so a wrong or foreign id is a normal JSON 404.
    const first = await getOperationInOrganization(deps.db, principal.organizationId, operationId);
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache, no-transform',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
    });
    try {
      await follow(deps, req, res, principal, slot, first);
    } finally {
      res.end();
    }
  } finally {
    await slot.release();
  }
}

async function follow(
  deps: OperationStreamDeps,
  req: Request,
  res: Response,
  principal: Principal,
  slot: StreamSlot,
  first: Snapshot,
): Promise<void> {
  const { db, bounds } = deps;
  const { organizationId } = principal;
  const operationId = first.operation.id;
  // The client hung up: stop at once, even in the middle of a wait.
  const hangUp = new AbortController();
  res.on('close', () => hangUp.abort());

  let lastWrite = Date.now();
  const write = (text: string) => {
    res.write(text);
    lastWrite = Date.now();
  };
  const send = (event: string, data: unknown, id?: number) =>
    write(`${id === undefined ? '' : `id: ${id}\n`}event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
  const end = (reason: StreamEndReason, message: string, snapshot?: Snapshot) =>
    send('end', { ...(snapshot ? progressOf(snapshot) : {}), reason, message });

  const lastEventId = Number(req.get('last-event-id') ?? 0);
  let after = Number.isSafeInteger(lastEventId) && lastEventId > 0 ? lastEventId : 0;
  let snapshot = first;
  let lastProgress = '';
  let lastNews = Date.now();
  let lastKeyCheck = Date.now();

  while (!hangUp.signal.aborted) {
    // Streams end when the server starts shutting down, so they never hold it open.
    if (!deps.accepting()) {
      end('shutting_down', 'The server is shutting down; reconnect with Last-Event-ID to continue.', snapshot);
      return;
    }
    if (Date.now() - lastKeyCheck >= bounds.keyCheckMs) {
      lastKeyCheck = Date.now();
      if (!(await isApiKeyActive(db, principal))) {
        end('key_revoked', 'The API key was revoked; the stream ended.');
        return;
      }
      await slot.renew();
    }
    for (const event of await listEvents(db, organizationId, operationId, after, 500)) {
      after = event.id;
      send(event.kind, { actor: event.actor, at: event.created_at, ...event.data }, event.id);
      lastNews = Date.now();
    }
    const progress = JSON.stringify(progressOf(snapshot));
    if (progress !== lastProgress) {
      lastProgress = progress;
      write(`event: progress\ndata: ${progress}\n\n`);
      lastNews = Date.now();
    }
    const { status } = snapshot.operation;
    if (isFinished(status)) {
      end('finished', `Operation ${operationId} is ${status}.`, snapshot);
      return;
    }
    if (status !== 'active' && Date.now() - lastNews >= bounds.idleMs) {
      end(
        'idle',
        `Operation ${operationId} is ${status} and nothing happened for ${bounds.idleMs} ms (OPSPAD_STREAM_IDLE_TIMEOUT); reconnect to follow it again.`,
        snapshot,
      );
      return;
    }
    if (Date.now() - lastWrite >= bounds.heartbeatMs) {
      write(': heartbeat\n\n');
    }
    await sleep(bounds.pollMs, undefined, { signal: hangUp.signal }).catch(() => {});
    if (!hangUp.signal.aborted) {
      snapshot = await getOperationInOrganization(db, organizationId, operationId);
    }
  }
}
