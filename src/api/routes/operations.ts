/**
 * Operations by id within the key's organization, whatever their conversation:
 * `GET /v1/operations/:operationId` (status and counts) and
 * `GET /v1/operations/:operationId/events`: an operation's progress as server-sent events, for
 * `opspad ops watch` and UIs, bounded per key, in idle time and by the key's validity (see
 * operation-stream.ts), and
 * `GET /v1/operations/:operationId/results`: every item's outcome as one file (results-export.ts), and
 * `GET /v1/conversations/:conversationId/operations`: a conversation's operations, finished ones
 * included, newest first, a keyset page at a time (what an MCP client's `tasks/list` pages through).
 */
import { Router } from 'express';
import { z } from 'zod';
import { ResultsQuery } from '../../domain/item-results.ts';
import { remainingOf } from '../../domain/operation.ts';
import type { ConversationOperationsPage } from '../../domain/operation-output.ts';
import { operationProgressOf } from '../../domain/operation-progress.ts';
import { parseOrThrow } from '../../domain/validation.ts';
import {
  type ConversationOperationsPage as ConversationOperationsPageRows,
  getOperationInOrganization,
  listConversationOperations,
} from '../../store/index.ts';
import { principalOf } from '../auth.ts';
import { type OperationStreamDeps, progressOf, streamOperationEvents, takeSlot } from '../operation-stream.ts';
import { conversationIdOf } from '../params.ts';
import { streamResults } from '../results-export.ts';

export const Params = z.object({ operationId: z.uuid({ error: 'must be an operation id (a UUID)' }) });

export const MAX_OPERATIONS_PAGE = 100;
export const OperationsPageQuery = z.object({
  before: z
    .uuid({ error: 'must be an operation id (a UUID): the next_before of the previous page' })
    .optional()
    .describe('The `next_before` of the previous page; unset: the newest operations.'),
  limit: z.coerce
    .number({ error: `must be a whole number from 1 to ${MAX_OPERATIONS_PAGE}` })
    .int({ error: `must be a whole number from 1 to ${MAX_OPERATIONS_PAGE}` })
    .min(1, { error: `must be a whole number from 1 to ${MAX_OPERATIONS_PAGE}` })
    .max(MAX_OPERATIONS_PAGE, { error: `must be at most ${MAX_OPERATIONS_PAGE}: page with next_before` })
    .default(50)
    .describe(`Operations per page, 1 to ${MAX_OPERATIONS_PAGE}. Default 50.`),
});

/** The answer of `GET /v1/conversations/:id/operations` (also `/mcp`'s, in process). */
export function conversationOperationsAnswer(page: ConversationOperationsPageRows): ConversationOperationsPage {
  return {
    operations: page.operations.map((op) => ({
      ...operationProgressOf(op, {
        total_items: op.total_items,
        completed_count: op.completed_count,
        failed_count: op.failed_count,
        remaining_count: remainingOf(op),
        in_flight_count: op.in_flight_count,
      }),
      created_at: op.created_at.toISOString(),
      updated_at: op.updated_at.toISOString(),
    })),
    next_before: page.nextBefore,
  };
}

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
  router.get('/conversations/:conversationId/operations', async (req, res) => {
    const conversationId = conversationIdOf(req.params);
    const query = parseOrThrow(OperationsPageQuery, req.query ?? {}, 'query');
    const { organizationId } = principalOf(res);
    const page = await listConversationOperations(deps.db, { organizationId, conversationId }, query);
    res.json(conversationOperationsAnswer(page));
  });
  return router;
}
