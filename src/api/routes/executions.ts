/**
 * Executions of the notes scratchpad:
 * - `POST /v1/conversations/:conversationId/executions` starts one (201); pass its id as the
 *   `X-Opspad-Execution` header of tool calls to scope their notes to it;
 * - `POST /v1/executions/:executionId/end` ends it and clears its notes (persistent notes stay);
 *   ending an ended execution answers the same with `cleared_notes: 0`;
 * - `GET /v1/executions/:executionId/traces` lists its reads and writes in order
 *   (`?after=<seq>&limit=<n>` pages through long ones).
 * All within the key's organization: another organization's execution is "not found".
 */
import { Router } from 'express';
import { z } from 'zod';
import { MAX_INT4, parseOrThrow } from '../../domain/validation.ts';
import {
  createExecution,
  type Database,
  type ExecutionRecord,
  endExecution,
  listTraces,
  type TraceRecord,
} from '../../store/index.ts';
import { principalOf } from '../auth.ts';
import { conversationIdOf } from '../params.ts';

export const MAX_TRACES_PAGE = 1000;

export const Params = z.object({
  executionId: z.guid({ error: 'must be an execution_id returned by POST /v1/conversations/:id/executions' }),
});

/** Starting an execution takes no input: an absent or empty body. */
export const CreateBody = z.strictObject({}).optional();

export const TracesQuery = z.strictObject({
  after: z.coerce
    .number({ error: 'must be a number' })
    .int('must be a whole number')
    .min(0, 'must be 0 or more')
    .max(MAX_INT4, `must be at most ${MAX_INT4}: a next_after returned by a previous page`)
    .optional(),
  limit: z.coerce
    .number({ error: 'must be a number' })
    .int('must be a whole number')
    .min(1, 'must be at least 1')
    .max(MAX_TRACES_PAGE, `must be at most ${MAX_TRACES_PAGE}`)
    .optional(),
});

function executionIdOfPath(params: unknown): string {
  return parseOrThrow(Params, params, 'path').executionId.toLowerCase();
}

function executionBody(execution: ExecutionRecord) {
  return {
    execution_id: execution.id,
    conversation_id: execution.conversation_id,
    status: execution.status,
    created_at: execution.created_at,
    ended_at: execution.ended_at,
  };
}

function traceBody(trace: TraceRecord) {
  return {
    seq: trace.seq,
    kind: trace.kind,
    ...(trace.notes === null ? {} : { notes: trace.notes }),
    at: trace.at,
  };
}

export function executionsRouter(db: Database, maxRunning?: number): Router {
  const router = Router();

  router.post('/conversations/:conversationId/executions', async (req, res) => {
    const conversationId = conversationIdOf(req.params);
    parseOrThrow(CreateBody, req.body, 'body');
    const { organizationId } = principalOf(res);
    const execution = await createExecution(db, { organizationId, conversationId }, maxRunning);
    const { ended_at: _ended, ...body } = executionBody(execution);
    res.status(201).json(body);
  });

  router.post('/executions/:executionId/end', async (req, res) => {
    const executionId = executionIdOfPath(req.params);
    const { execution, clearedNotes } = await endExecution(db, principalOf(res).organizationId, executionId);
    res.json({ ...executionBody(execution), cleared_notes: clearedNotes });
  });

  router.get('/executions/:executionId/traces', async (req, res) => {
    const executionId = executionIdOfPath(req.params);
    const query = parseOrThrow(TracesQuery, req.query, 'query');
    const afterSeq = query.after ?? 0;
    const { traces, hasMore, prunedAt } = await listTraces(db, principalOf(res).organizationId, executionId, {
      afterSeq,
      limit: query.limit ?? MAX_TRACES_PAGE,
    });
    res.json({
      execution_id: executionId,
      traces: traces.map(traceBody),
      next_after: hasMore ? (traces[traces.length - 1]?.seq ?? afterSeq) : null,
      ...(prunedAt ? { traces_pruned_at: prunedAt.toISOString() } : {}),
    });
  });

  return router;
}
