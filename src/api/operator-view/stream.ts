/**
 * `GET /admin/operations/stream`: the live updates of an operator page, as server-sent events.
 * Like the operations' own event stream (operation-stream.ts), it reads Postgres, the source of
 * truth, every `pollMs` — so it shows the work of every process and machine — with the same
 * heartbeat and the same `end` when the server shuts down. Events:
 * - `row` {id, html}: a watched operation changed; `html` is its row as the page renders it
 *   (operation-row.ts: escaped the same way), for the page to swap in place;
 * - `audit` {operation_id, html} with the entry's id as the SSE id (Last-Event-ID resumes): a new
 *   audit-trail entry of a watched operation, when `audit_after` is given (the detail page);
 * - `newer` {count}: operations matching the page's filter created after `newer_than` (the newest
 *   page only), so the page can offer them without moving the rows under the operator's cursor;
 * - `end` {reason: 'shutting_down'}.
 *
 * Each poll is one query for the watched rows (at most {@link MAX_WATCHED}), plus one for the
 * trail and one for the count when asked: a constant number, whatever the rows. Streams are
 * capped per process ({@link MAX_OPERATOR_STREAMS}); one more is refused with 429.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Request, Response } from 'express';
import { z } from 'zod';
import { AppError } from '../../domain/errors.ts';
import type { Database } from '../../store/index.ts';
import { auditTrailSince, countNewerOperations, operatorRowsByIds } from '../../store/index.ts';
import { auditRow } from './detail-page.ts';
import { filterOf, ListFilterQuery } from './list-page.ts';
import { operationRow } from './operation-row.ts';

export const MAX_WATCHED = 100;
export const MAX_OPERATOR_STREAMS = 32;
/** Audit entries sent per poll at most; the rest follow on the next polls. */
const AUDIT_PER_POLL = 200;

export const StreamQuery = ListFilterQuery.extend({
  ids: z
    .string({ error: 'must be operation ids separated by commas' })
    .max(MAX_WATCHED * 37)
    .transform((value) => (value ? value.split(',') : []))
    .pipe(z.array(z.uuid({ error: 'must be operation ids' })).max(MAX_WATCHED, `at most ${MAX_WATCHED} operations`))
    .default([]),
  audit_after: z.coerce.number({ error: 'must be an audit-trail entry id' }).int().min(0).optional(),
  newer_than: z.union([z.uuid(), z.literal('none')], { error: 'must be an operation id or "none"' }).optional(),
});
export type StreamQuery = z.output<typeof StreamQuery>;

export interface OperatorStreamDeps {
  db: Database;
  readOnly: boolean;
  pollMs: number;
  heartbeatMs: number;
  /** False once the server is shutting down. */
  accepting: () => boolean;
}

export function operatorStreams(deps: OperatorStreamDeps) {
  let open = 0;
  return async function stream(q: StreamQuery, req: Request, res: Response): Promise<void> {
    if (open >= MAX_OPERATOR_STREAMS) {
      res.set('Retry-After', '5');
      throw new AppError(
        'too_many_streams',
        `${MAX_OPERATOR_STREAMS} operator pages already follow live updates in this process. Close one, or retry in 5 s.`,
        { limit: MAX_OPERATOR_STREAMS, retry_after_seconds: 5 },
      );
    }
    open += 1;
    try {
      res.writeHead(200, {
        'content-type': 'text/event-stream; charset=utf-8',
        'cache-control': 'no-cache, no-transform',
        connection: 'keep-alive',
        'x-accel-buffering': 'no',
      });
      // The page knows at once that it is live, even if nothing changes for a while.
      res.flushHeaders();
      await follow(deps, q, req, res);
    } finally {
      open -= 1;
      res.end();
    }
  };
}

async function follow(deps: OperatorStreamDeps, q: StreamQuery, req: Request, res: Response): Promise<void> {
  const hangUp = new AbortController();
  res.on('close', () => hangUp.abort());
  let lastWrite = Date.now();
  const send = (event: string, data: unknown, id?: number) => {
    res.write(`${id === undefined ? '' : `id: ${id}\n`}event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
    lastWrite = Date.now();
  };
  const sentRows = new Map<string, string>();
  const resumedFrom = Number(req.get('last-event-id') ?? Number.NaN);
  let auditAfter =
    q.audit_after === undefined ? null : Math.max(q.audit_after, Number.isSafeInteger(resumedFrom) ? resumedFrom : 0);
  let lastNewer = -1;
  const filter = filterOf(q);

  while (!hangUp.signal.aborted) {
    if (!deps.accepting()) {
      send('end', { reason: 'shutting_down', message: 'The server is shutting down; the page reconnects by itself.' });
      return;
    }
    for (const row of await operatorRowsByIds(deps.db, q.ids)) {
      const html = operationRow(row, deps.readOnly);
      if (sentRows.get(row.id) !== html) {
        // The first poll sends every row once: the page may be older than the stream.
        sentRows.set(row.id, html);
        send('row', { id: row.id, html });
      }
    }
    if (auditAfter !== null) {
      for (const event of await auditTrailSince(deps.db, q.ids, auditAfter, AUDIT_PER_POLL)) {
        auditAfter = event.id;
        send('audit', { operation_id: event.operation_id, html: auditRow(event) }, event.id);
      }
    }
    if (q.newer_than !== undefined) {
      const newer = await countNewerOperations(deps.db, filter, q.newer_than === 'none' ? null : q.newer_than);
      if (newer !== lastNewer) {
        lastNewer = newer;
        send('newer', { count: newer });
      }
    }
    if (Date.now() - lastWrite >= deps.heartbeatMs) {
      res.write(': heartbeat\n\n');
      lastWrite = Date.now();
    }
    await sleep(deps.pollMs, undefined, { signal: hangUp.signal }).catch(() => {});
  }
}
