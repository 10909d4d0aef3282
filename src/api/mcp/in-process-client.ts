/**
 * The MCP server of `/mcp` calls opspad in the API process itself: the same tool registry, context
 * fragment and operation reads as `/v1`, scoped by the organization of the request's credential.
 * It is the {@link OpspadHttpClient} the stdio server (src/mcp/server.ts) talks HTTP through, so
 * both transports share one server and one set of conversation rules (src/mcp/session.ts); an
 * error opspad raises becomes the answer `/v1` would give (its status and error JSON).
 */
import { AppError, errorBody, httpStatusOf } from '../../domain/errors.ts';
import type { HttpAnswer, OpspadHttpClient } from '../../mcp/http-client.ts';
import {
  type Database,
  getOperationInOrganization,
  listConversationOperations,
  type Principal,
} from '../../store/index.ts';
import { buildContextFragment, type ContextBudgets } from '../../tools/context-fragment.ts';
import { toolDefinitions } from '../../tools/definitions.ts';
import type { ToolRegistry } from '../../tools/registry.ts';
import { conversationOperationsAnswer } from '../routes/operations.ts';

export interface InProcessDeps {
  db: Database;
  tools: ToolRegistry;
  budgets: ContextBudgets;
}

/** Who is calling, for the audit trail: the key, or the OAuth grant (src/api/mcp/bearer.ts). */
export function actorOf(principal: Principal): string {
  return principal.grantId ? `oauth_grant:${principal.grantId}` : `api_key:${principal.keyId}`;
}

async function answer(run: () => Promise<unknown>): Promise<HttpAnswer> {
  try {
    return { status: 200, ok: true, body: await run() };
  } catch (error) {
    if (error instanceof AppError) {
      return { status: httpStatusOf(error.code), ok: false, body: errorBody(error) };
    }
    throw error;
  }
}

export function inProcessClient(deps: InProcessDeps, principal: Principal, baseUrl: string): OpspadHttpClient {
  const { organizationId } = principal;
  const actor = actorOf(principal);
  return {
    baseUrl,
    async listTools() {
      return toolDefinitions();
    },
    callTool(conversationId, name, input) {
      return answer(() => deps.tools.execute(name, input ?? {}, { scope: { organizationId, conversationId }, actor }));
    },
    async context(conversationId, { others }) {
      const fragment = await buildContextFragment(deps.db, { organizationId, conversationId }, deps.budgets, {
        otherConversations: others,
      });
      return fragment;
    },
    async operations(conversationId, page) {
      return conversationOperationsAnswer(
        await listConversationOperations(deps.db, { organizationId, conversationId }, page),
      );
    },
    decideApproval(operationId, decision) {
      return answer(async () => {
        const { operation } = await getOperationInOrganization(deps.db, organizationId, operationId);
        return deps.tools.decideApproval(
          { organizationId, conversationId: operation.conversation_id },
          operationId,
          decision,
          `user:${actor}`,
        );
      });
    },
    async operation(operationId) {
      try {
        const { operation } = await getOperationInOrganization(deps.db, organizationId, operationId);
        return { conversation_id: operation.conversation_id, status: operation.status };
      } catch (error) {
        if (error instanceof AppError && error.code === 'not_found') {
          return null;
        }
        throw error;
      }
    },
  };
}
