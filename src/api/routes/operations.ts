/**
 * Operations by id within the key's organization, whatever their conversation:
 * `GET /v1/operations/:operationId` (status and counts) and
 * `GET /v1/operations/:operationId/events`: an operation's progress as server-sent events, for
 * `opspad ops watch` and UIs. Reads Postgres (the source of truth) once a second, so it works
 * the same whichever process or machine does the work; the stream ends when the operation does.
 *
 * Events: `progress` (counts, status), then one event per audit-trail entry (`batch_recorded`,
 * `paused`, …), and `end` when the operation is completed or cancelled.
 */
import { Router } from 'express';
import { z } from 'zod';
import { isFinished } from '../../domain/operation.ts';
import { parseOrThrow } from '../../domain/validation.ts';
import { type Database, getOperationInOrganization, listEvents } from '../../store/index.ts';
import { principalOf } from '../auth.ts';

export const Params = z.object({ operationId: z.uuid({ error: 'must be an operation id (a UUID)' }) });
const KEEPALIVE_MS = 15_000;

function summary({ operation, counts }: Awaited<ReturnType<typeof getOperationInOrganization>>) {
  return {
    operation_id: operation.id,
    status: operation.status,
    operation_type: operation.operation_type,
    conversation_id: operation.conversation_id,
    execution: operation.state_json.execution,
    paused_reason: operation.status === 'paused' ? (operation.state_json.paused_reason ?? null) : null,
    ...counts,
  };
}

export function operationsRouter(db: Database, pollMs: number, accepting: () => boolean): Router {
  const router = Router();
  router.get('/operations/:operationId', async (req, res) => {
    const { operationId } = parseOrThrow(Params, req.params, 'path');
    res.json(summary(await getOperationInOrganization(db, principalOf(res).organizationId, operationId)));
  });

  router.get('/operations/:operationId/events', async (req, res) => {
    const { operationId } = parseOrThrow(Params, req.params, 'path');
    const { organizationId } = principalOf(res);
    // Before any byte is sent, so a wrong or foreign id is a normal JSON 404.
    let snapshot = await getOperationInOrganization(db, organizationId, operationId);

    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache, no-transform',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
    });
    const send = (event: string, data: unknown, id?: number) => {
      res.write(`${id === undefined ? '' : `id: ${id}\n`}event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
    };
    const progress = () => summary(snapshot);

    let closed = false;
    req.on('close', () => {
      closed = true;
    });
    const lastEventId = Number(req.get('last-event-id') ?? 0);
    let after = Number.isSafeInteger(lastEventId) && lastEventId > 0 ? lastEventId : 0;
    let lastProgress = '';
    let lastWrite = Date.now();
    try {
      // Streams end when the server starts shutting down, so they never hold it open.
      while (!closed && accepting()) {
        for (const event of await listEvents(db, organizationId, operationId, after, 500)) {
          after = event.id;
          send(event.kind, { actor: event.actor, at: event.created_at, ...event.data }, event.id);
          lastWrite = Date.now();
        }
        const current = JSON.stringify(progress());
        if (current !== lastProgress) {
          lastProgress = current;
          res.write(`event: progress\ndata: ${current}\n\n`);
          lastWrite = Date.now();
        }
        if (isFinished(snapshot.operation.status)) {
          send('end', progress());
          break;
        }
        if (Date.now() - lastWrite > KEEPALIVE_MS) {
          res.write(': keep-alive\n\n');
          lastWrite = Date.now();
        }
        await new Promise((resolve) => setTimeout(resolve, pollMs));
        if (!closed) {
          snapshot = await getOperationInOrganization(db, organizationId, operationId);
        }
      }
    } finally {
      res.end();
    }
  });
  return router;
}
