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
import { streamedBodyOf } from '../operation-body.ts';
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
    const ctx = {
      scope: { organizationId: principal.organizationId, conversationId },
      actor: `api_key:${principal.keyId}`,
      executionId: executionIdOf(req.get('x-opspad-execution')),
    };
    const streamed = streamedBodyOf(req);
    if (streamed) {
      try {
        res.json(await tools.executeStreamed(toolName, streamed, ctx));
      } finally {
        streamed.close(); // refused before the body's end: the rest is not wanted
      }
      return;
    }
    if (req.body === undefined) {
      throw new AppError(
        'validation_failed',
        'Send the tool input as a JSON body with "Content-Type: application/json".',
        {
          field: '(body)',
        },
      );
    }
    res.json(await tools.execute(toolName, req.body, ctx));
  });

  return router;
}
