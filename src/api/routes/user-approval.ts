/**
 * `POST /v1/operations/:operationId/approval` `{decision: "approve" | "reject"}`: the user's
 * answer to "send these items?", relayed by the application that asked them — `opspad mcp`
 * after an MCP elicitation, or an assistant's own UI. It is not a tool: a model never approves
 * its own operation. The audit trail names it `user:api_key:<id>` (the user, through the holder
 * of that key). Scoped by the key's organization: another organization's operation is 404.
 */
import { Router } from 'express';
import { z } from 'zod';
import { parseOrThrow } from '../../domain/validation.ts';
import { type Database, getOperationInOrganization } from '../../store/index.ts';
import type { ToolRegistry } from '../../tools/registry.ts';
import { principalOf } from '../auth.ts';
import { Params } from './operations.ts';

export const UserApprovalBody = z.object({
  decision: z.enum(['approve', 'reject'], { error: 'must be "approve" or "reject"' }),
});

export function userApprovalRouter(tools: ToolRegistry, db: Database): Router {
  const router = Router();
  router.post('/operations/:operationId/approval', async (req, res) => {
    const { operationId } = parseOrThrow(Params, req.params, 'path');
    const { decision } = parseOrThrow(UserApprovalBody, req.body ?? {}, 'body');
    const principal = principalOf(res);
    const { operation } = await getOperationInOrganization(db, principal.organizationId, operationId);
    res.json(
      await tools.decideApproval(
        { organizationId: principal.organizationId, conversationId: operation.conversation_id },
        operationId,
        decision,
        `user:api_key:${principal.keyId}`,
      ),
    );
  });
  return router;
}
