/** `GET /v1/conversations/:conversationId/context`: the system-prompt fragment. */
import { Router } from 'express';
import type { Database } from '../../store/index.ts';
import { buildContextFragment } from '../../tools/context-fragment.ts';
import { principalOf } from '../auth.ts';
import { conversationIdOf } from '../params.ts';

export function contextRouter(db: Database, reciteBudget: number): Router {
  const router = Router();
  router.get('/conversations/:conversationId/context', async (req, res) => {
    const conversationId = conversationIdOf(req.params);
    const { organizationId } = principalOf(res);
    res.json(await buildContextFragment(db, { organizationId, conversationId }, reciteBudget));
  });
  return router;
}
