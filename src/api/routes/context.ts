/**
 * `GET /v1/conversations/:conversationId/context`: the system-prompt fragment. With
 * `?other_conversations=true` it also lists the open operations of the organization's other
 * conversations (what `opspad mcp` shows a chat that knows nothing), within the same budget.
 */
import { Router } from 'express';
import { z } from 'zod';
import { parseOrThrow } from '../../domain/validation.ts';
import type { Database } from '../../store/index.ts';
import { buildContextFragment, type ContextBudgets } from '../../tools/context-fragment.ts';
import { principalOf } from '../auth.ts';
import { conversationIdOf } from '../params.ts';

const ContextQuery = z.object({
  other_conversations: z
    .enum(['true', 'false'], { error: 'must be true or false' })
    .optional()
    .transform((value) => value === 'true'),
});

export function contextRouter(db: Database, budgets: ContextBudgets): Router {
  const router = Router();
  router.get('/conversations/:conversationId/context', async (req, res) => {
    const conversationId = conversationIdOf(req.params);
    const { organizationId } = principalOf(res);
    const query = parseOrThrow(ContextQuery, req.query ?? {}, 'query');
    res.json(
      await buildContextFragment(db, { organizationId, conversationId }, budgets, {
        otherConversations: query.other_conversations,
      }),
    );
  });
  return router;
}
