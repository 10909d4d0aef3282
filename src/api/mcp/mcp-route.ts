/**
 * `/mcp`: opspad's MCP server (src/mcp/server.ts, the one `opspad mcp` serves over stdio) over
 * Streamable HTTP, on the API's own process and port, behind the same key, limits and bounds as
 * `/v1` (create-app.ts mounts it).
 *
 * Sessions live in Postgres (store/mcp-access/mcp-session-repo.ts), not in a process: each
 * request is served by a server and a transport built for it (the SDK's transport in its
 * stateless mode) from the session's row, so several API processes behind a load balancer serve
 * one session without affinity, and a restart loses none. `initialize` opens the session and
 * answers its `Mcp-Session-Id`; every later request must carry it (400 without, 404 for a session
 * unknown, ended, idle too long or another organization's — one answer for all). A session
 * follows the stdio server's conversation rules (src/mcp/session.ts): a home conversation of its
 * own, or the one pinned at `initialize` by `X-Opspad-Conversation` or `?conversation=`.
 *
 * GET answers 405: this server sends no message of its own outside a request's response stream,
 * so there is nothing for a standalone stream to carry. DELETE ends the session. (The table of
 * the OpenAPI document: src/api/openapi/mcp-routes.ts.)
 */
import { randomUUID } from 'node:crypto';
import { createRequire } from 'node:module';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { type InitializeRequest, isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import { type Request, type Response, Router } from 'express';
import { AppError } from '../../domain/errors.ts';
import type { Logger } from '../../logger.ts';
import { createOpspadMcpServer } from '../../mcp/server.ts';
import { type ConversationRouter, createConversationRouter } from '../../mcp/session.ts';
import {
  closeMcpSession,
  findMcpSession,
  type McpSessionBounds,
  type McpSessionRow,
  openMcpSession,
  saveMcpSession,
  touchMcpSession,
} from '../../store/index.ts';
import { principalOf } from '../auth.ts';
import { type InProcessDeps, inProcessClient } from './in-process-client.ts';
import type { PublicAddress } from './public-address.ts';

const { version } = createRequire(import.meta.url)('../../../package.json') as { version: string };
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** A session's idle clock restarts at most this often (one UPDATE a minute, not one a request). */
const TOUCH_AFTER_SECONDS = 60;
const CLIENT_NAME_MAX = 200;
export const CONVERSATION_HEADER = 'x-opspad-conversation';

export interface McpRouteDeps extends InProcessDeps {
  address: PublicAddress;
  sessions: McpSessionBounds;
  logger: Logger;
}

/** A transport-level refusal, as the SDK's transport words its own (a JSON-RPC error, no id). */
function jsonRpcRefusal(res: Response, status: number, code: number, message: string): void {
  res.status(status).json({ jsonrpc: '2.0', error: { code, message }, id: null });
}

/** The conversation `initialize` pins, if any (header or query parameter). */
function pinnedConversation(req: Request): string | undefined {
  const fromHeader = req.get(CONVERSATION_HEADER);
  const fromQuery = typeof req.query.conversation === 'string' ? req.query.conversation : undefined;
  const value = fromHeader ?? fromQuery;
  if (value === undefined) {
    return undefined;
  }
  if (!UUID.test(value)) {
    throw new AppError(
      'validation_failed',
      `${fromHeader === undefined ? 'conversation' : 'X-Opspad-Conversation'} must be a conversation id (a UUID); leave it out for a conversation of the session's own.`,
      { field: fromHeader === undefined ? 'conversation' : CONVERSATION_HEADER },
    );
  }
  return value.toLowerCase();
}

/** The session's router, writing what it learns back to the session's row before the call answers. */
function sessionRouter(
  inner: ConversationRouter,
  save: (memory: ReturnType<ConversationRouter['memory']>) => Promise<void>,
): ConversationRouter {
  let saved = JSON.stringify(inner.memory());
  const persist = async () => {
    const memory = inner.memory();
    const now = JSON.stringify(memory);
    if (now !== saved) {
      saved = now;
      await save(memory);
    }
  };
  return {
    mode: inner.mode,
    home: inner.home,
    async route(name, input, signal) {
      const call = await inner.route(name, input, signal);
      await persist();
      return call;
    },
    async answered(name, call, body) {
      await inner.answered(name, call, body);
      await persist();
    },
    memory: () => inner.memory(),
  };
}

export function mcpRouter(deps: McpRouteDeps): Router {
  const router = Router();
  const { db } = deps;

  const openSession = async (req: Request, organizationId: string, init: InitializeRequest): Promise<McpSessionRow> => {
    const pinned = pinnedConversation(req);
    const home = pinned ?? randomUUID();
    const clientName = String(init.params.clientInfo?.name ?? '').slice(0, CLIENT_NAME_MAX) || null;
    const id = await openMcpSession(
      db,
      organizationId,
      { homeConversationId: home, pinned: pinned !== undefined, clientName },
      deps.sessions,
    );
    return {
      id,
      home_conversation_id: home,
      pinned: pinned !== undefined,
      last_operation_id: null,
      home_operation_ids: [],
      idle_seconds: 0,
    };
  };

  router.post('/', async (req, res) => {
    const principal = principalOf(res);
    const { organizationId } = principal;
    const messages: unknown[] = Array.isArray(req.body) ? req.body : [req.body];
    const init = messages.find(isInitializeRequest);
    let session: McpSessionRow | null;
    if (init) {
      if (messages.length > 1) {
        jsonRpcRefusal(res, 400, -32600, 'Invalid Request: Only one initialization request is allowed');
        return;
      }
      session = await openSession(req, organizationId, init);
    } else {
      const id = req.get('mcp-session-id');
      if (!id) {
        jsonRpcRefusal(res, 400, -32000, 'Bad Request: Mcp-Session-Id header is required');
        return;
      }
      session = UUID.test(id) ? await findMcpSession(db, organizationId, id, deps.sessions.idleMs) : null;
      if (!session) {
        jsonRpcRefusal(res, 404, -32001, 'Session not found');
        return;
      }
      if (session.idle_seconds > TOUCH_AFTER_SECONDS) {
        await touchMcpSession(db, organizationId, session.id);
      }
    }
    const { id } = session;
    const client = inProcessClient(deps, principal, deps.address.origin(req));
    const inner = createConversationRouter(
      client,
      session.pinned
        ? { conversationId: session.home_conversation_id }
        : {
            resume: {
              home: session.home_conversation_id,
              memory: { lastOperation: session.last_operation_id, homeOperations: session.home_operation_ids },
            },
          },
    );
    const conversations = sessionRouter(inner, (memory) =>
      saveMcpSession(db, organizationId, id, {
        lastOperationId: memory.lastOperation,
        homeOperationIds: memory.homeOperations,
      }),
    );
    const server = createOpspadMcpServer({
      client,
      router: conversations,
      version,
      log: (message) => deps.logger.warn({ mcp_session: id }, message),
      askApproval: false,
    });
    // Stateless: this transport serves this one request; the session is the row.
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    res.on('close', () => {
      void server.close();
    });
    res.setHeader('mcp-session-id', id);
    await server.connect(transport);
    await transport.handleRequest(req, res, req.body);
  });

  router.delete('/', async (req, res) => {
    const id = req.get('mcp-session-id');
    if (!id) {
      jsonRpcRefusal(res, 400, -32000, 'Bad Request: Mcp-Session-Id header is required');
      return;
    }
    if (!UUID.test(id) || !(await closeMcpSession(db, principalOf(res).organizationId, id))) {
      jsonRpcRefusal(res, 404, -32001, 'Session not found');
      return;
    }
    res.status(200).end();
  });

  router.get('/', (_req, res) => {
    res.set('Allow', 'POST, DELETE');
    jsonRpcRefusal(
      res,
      405,
      -32000,
      'Method not allowed: POST JSON-RPC messages; this server opens no standalone stream.',
    );
  });
  return router;
}
