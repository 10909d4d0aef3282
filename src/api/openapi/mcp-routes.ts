/**
 * `/mcp` (MCP over Streamable HTTP, src/api/mcp/mcp-route.ts) and its protected-resource metadata.
 * The messages are MCP's JSON-RPC (the MCP specification describes them); this table says what
 * the HTTP side is: the credential, the session header, and the refusals opspad answers before a
 * message reaches the MCP server. The OAuth endpoints (`/register`, `/authorize`, `/token`,
 * `/revoke`) are standard ones, announced by `/.well-known/oauth-authorization-server`.
 */
import { z } from 'zod';
import type { HeaderParam, RouteSpec } from './route-spec.ts';

const JsonRpcMessage = z
  .looseObject({
    jsonrpc: z.literal('2.0'),
    id: z.union([z.string(), z.number()]).optional(),
    method: z.string().optional(),
    params: z.record(z.string(), z.unknown()).optional(),
  })
  .meta({ description: 'A JSON-RPC message of MCP (or a batch of them), e.g. initialize, tools/list, tools/call.' });

const ProtectedResourceMetadata = z.object({
  resource: z.string().meta({ description: 'The URL of /mcp.' }),
  authorization_servers: z
    .array(z.string())
    .optional()
    .meta({ description: 'This server, when it serves OAuth (OPSPAD_OAUTH); absent: API keys only.' }),
  bearer_methods_supported: z.array(z.string()),
  resource_name: z.string(),
});

const SESSION: HeaderParam = {
  name: 'Mcp-Session-Id',
  description: 'The session `initialize` answered with; required on every later request.',
  schema: z.uuid().optional(),
};

/** A transport-level refusal: a JSON-RPC error without id. */
const JSON_RPC_REFUSAL = { other: { contentType: 'application/json', description: 'A JSON-RPC error without id.' } };

export const MCP_ROUTES: RouteSpec[] = [
  {
    method: 'post',
    path: '/mcp',
    operationId: 'mcp_message',
    summary: 'Send MCP messages (Streamable HTTP); answers stream back as server-sent events',
    description:
      'An API key or an OAuth access token of /mcp as Bearer. `initialize` opens a session (answered with `Mcp-Session-Id`); `X-Opspad-Conversation` or `?conversation=` at initialize pins the session to a conversation. Host and Origin must be this server’s (OPSPAD_PUBLIC_URL). A 401 carries `WWW-Authenticate` with `resource_metadata`.',
    tag: 'MCP',
    auth: 'apiKey',
    query: z.object({ conversation: z.uuid().optional() }),
    headers: [
      SESSION,
      {
        name: 'X-Opspad-Conversation',
        description: 'At initialize: the conversation every call of the session goes to.',
        schema: z.uuid().optional(),
      },
    ],
    body: { name: 'JsonRpcMessage', schema: JsonRpcMessage, required: true },
    responses: {
      200: { description: 'The answers, as server-sent events.', other: { contentType: 'text/event-stream' } },
      202: { description: 'Notifications or responses only: accepted.' },
      404: {
        description: 'No such session (unknown, ended, idle too long or another organization’s).',
        ...JSON_RPC_REFUSAL,
      },
    },
    errors: ['validation_failed', 'invalid_json', 'body_too_large', 'unauthorized', 'forbidden', 'rate_limited'],
  },
  {
    method: 'get',
    path: '/mcp',
    operationId: 'mcp_stream',
    summary: 'No standalone stream: 405 (the server sends nothing outside a request’s answer)',
    tag: 'MCP',
    auth: 'apiKey',
    responses: { 405: { description: 'Method not allowed.', ...JSON_RPC_REFUSAL } },
    errors: ['unauthorized', 'forbidden', 'rate_limited'],
  },
  {
    method: 'delete',
    path: '/mcp',
    operationId: 'mcp_end_session',
    summary: 'End a session',
    tag: 'MCP',
    auth: 'apiKey',
    headers: [SESSION],
    responses: {
      200: { description: 'Ended.' },
      404: { description: 'No such session.', ...JSON_RPC_REFUSAL },
    },
    errors: ['unauthorized', 'forbidden', 'rate_limited'],
  },
  {
    method: 'get',
    path: '/.well-known/oauth-protected-resource/mcp',
    operationId: 'mcp_protected_resource_metadata',
    summary: 'The protected-resource metadata of /mcp (RFC 9728)',
    tag: 'MCP',
    auth: 'none',
    responses: {
      200: {
        description: 'The metadata.',
        json: { name: 'ProtectedResourceMetadata', schema: ProtectedResourceMetadata },
      },
    },
    errors: ['forbidden'],
  },
];
