/**
 * Operations by id within the key's organization, whatever their conversation:
 * `GET /v1/operations/:operationId` (status and counts) and
 * `GET /v1/operations/:operationId/events`: an operation's progress as server-sent events, for
 * `opspad ops watch` and UIs, bounded per key, in idle time and by the key's validity (see
 * operation-stream.ts), and
 * `GET /v1/operations/:operationId/results`: every item's outcome as one file (results-export.ts).
 */
import { Router } from 'express';
import { z } from 'zod';
import { ResultsQuery } from '../../domain/item-results.ts';
import { parseOrThrow } from '../../domain/validation.ts';
import { getOperationInOrganization } from '../../store/index.ts';
import { principalOf } from '../auth.ts';
import { type OperationStreamDeps, progressOf, streamOperationEvents, takeSlot } from '../operation-stream.ts';
import { streamResults } from '../results-export.ts';

export const Params = z.object({ operationId: z.uuid({ error: 'must be an operation id (a UUID)' }) });

export function operationsRouter(deps: OperationStreamDeps): Router {
  const router = Router();
  router.get('/operations/:operationId', async (req, res) => {
    const { operationId } = parseOrThrow(Params, req.params, 'path');
    res.json(progressOf(await getOperationInOrganization(deps.db, principalOf(res).organizationId, operationId)));
  });

  router.get('/operations/:operationId/events', async (req, res) => {
    const { operationId } = parseOrThrow(Params, req.params, 'path');
    await streamOperationEvents(deps, req, res, principalOf(res), operationId);
  });
  router.get('/operations/:operationId/results', async (req, res) => {
    const { operationId } = parseOrThrow(Params, req.params, 'path');
    const query = parseOrThrow(ResultsQuery, req.query, 'query');
    const principal = principalOf(res);
    const slot = await takeSlot(deps, principal, res);
    try {
      await streamResults(deps.db, res, slot, {
        organizationId: principal.organizationId,
        operationId,
        format: query.format,
        onlyFailed: query.status === 'failed',
      });
    } finally {
      await slot.release();
    }
  });
  return router;
}
