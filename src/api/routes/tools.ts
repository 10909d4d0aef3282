/**
 * The tools surface: `GET /v1/tools?format=opspad|openai|anthropic` (definitions for function
 * calling, in each vendor's format) and
 * `POST /v1/conversations/:conversationId/tools/:toolName` (one tool call, the body being the
 * tool's input JSON).
 */
import { Router } from 'express';
import { AppError } from '../../domain/errors.ts';
import { toolDefinitions } from '../../tools/definitions.ts';
import { TOOL_FORMATS, toolFormatOf, toolsInFormat } from '../../tools/formats.ts';
import type { ToolRegistry } from '../../tools/registry.ts';
import { principalOf } from '../auth.ts';
import { conversationIdOf, executionIdOf } from '../params.ts';

export function toolsRouter(tools: ToolRegistry): Router {
  const router = Router();
  const definitions = toolDefinitions();
  const byFormat = new Map(TOOL_FORMATS.map((format) => [format, toolsInFormat(format, definitions)]));

  router.get('/tools', (req, res) => {
    res.json({ tools: byFormat.get(toolFormatOf(req.query)) });
  });

  router.post('/conversations/:conversationId/tools/:toolName', async (req, res) => {
    const conversationId = conversationIdOf(req.params);
    const principal = principalOf(res);
    const toolName = String(req.params.toolName);
    if (req.body === undefined) {
      throw new AppError(
        'validation_failed',
        'Send the tool input as a JSON body with "Content-Type: application/json".',
        {
          field: '(body)',
        },
      );
    }
    const result = await tools.execute(toolName, req.body, {
      scope: { organizationId: principal.organizationId, conversationId },
      actor: `api_key:${principal.keyId}`,
      executionId: executionIdOf(req.get('x-opspad-execution')),
    });
    res.json(result);
  });

  return router;
}
