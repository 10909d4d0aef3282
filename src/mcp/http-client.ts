/**
 * The HTTP side of `opspad mcp`: the running opspad's tool definitions, tool calls, context
 * fragments and operations, with the organization's API key. Conversations are passed per call:
 * the MCP session decides which one a call belongs to (see session.ts).
 */
import type { ToolDefinition } from '../tools/definitions.ts';

export interface OpspadHttpOptions {
  /** e.g. `http://127.0.0.1:3000` */
  baseUrl: string;
  apiKey: string;
}

/** An answer of opspad: its status and JSON body (or the text, when it is not JSON). */
export interface HttpAnswer {
  status: number;
  ok: boolean;
  body: unknown;
}

/**
 * A request opspad refused or could not serve, where no answer can be passed on. The message
 * says what to fix: it becomes the text of an `isError` tool result.
 */
export class OpspadHttpError extends Error {
  override readonly name = 'OpspadHttpError';
  constructor(
    message: string,
    readonly status?: number,
    readonly body?: unknown,
  ) {
    super(message);
  }
}

/** The context fragment as `GET /v1/conversations/:id/context` answers it. */
export interface ContextAnswer {
  text: string;
  tokens?: number;
  operations: { operation_id: string; status: string }[];
  other_operations?: { operation_id: string; conversation_id?: string }[];
}

/** One page of a conversation's operations, as `GET /v1/conversations/:id/operations` answers it. */
export interface OperationsPageAnswer {
  operations: {
    operation_id: string;
    status: string;
    total_items: number;
    completed_count: number;
    failed_count: number;
    remaining_count: number;
    paused_reason: string | null;
    created_at: string;
    updated_at: string;
  }[];
  next_before: string | null;
}

export interface OperationWhere {
  conversation_id: string;
  status: string;
}

export interface OpspadHttpClient {
  readonly baseUrl: string;
  /** `GET /v1/tools`. */
  listTools(signal?: AbortSignal): Promise<ToolDefinition[]>;
  /** `POST /v1/conversations/:id/tools/:name`; an error status is an answer too, not a throw. */
  callTool(conversationId: string, name: string, input: unknown, signal?: AbortSignal): Promise<HttpAnswer>;
  /** `GET /v1/conversations/:id/context`, with other conversations' open operations if asked. */
  context(conversationId: string, options: { others: boolean }, signal?: AbortSignal): Promise<ContextAnswer>;
  /** `GET /v1/conversations/:id/operations`: a page of the conversation's operations, newest first. */
  operations(
    conversationId: string,
    page: { before?: string; limit: number },
    signal?: AbortSignal,
  ): Promise<OperationsPageAnswer>;
  /** `GET /v1/operations/:id`: where an operation of the organization lives and its status (null: not found). */
  operation(operationId: string, signal?: AbortSignal): Promise<OperationWhere | null>;
  /** `POST /v1/operations/:id/approval`: the user's answer on an operation awaiting approval. */
  decideApproval(operationId: string, decision: 'approve' | 'reject', signal?: AbortSignal): Promise<HttpAnswer>;
}

function errorMessage(answer: HttpAnswer): string {
  const error = (answer.body as { error?: { message?: unknown } } | null)?.error;
  return typeof error?.message === 'string' ? error.message : JSON.stringify(answer.body);
}

/** What to do about an answer opspad gave for the whole session (a key it refuses, …). */
export function sessionProblem(baseUrl: string, answer: HttpAnswer, what: string): OpspadHttpError | null {
  if (answer.status === 401) {
    return new OpspadHttpError(
      `opspad at ${baseUrl} refused the API key (401: ${errorMessage(answer)}). Set OPSPAD_API_KEY (or --key) in this MCP server's configuration to a key from \`opspad keys create\`, then restart it.`,
      401,
      answer.body,
    );
  }
  if (answer.status === 429 || answer.status >= 500) {
    return new OpspadHttpError(
      `${what} failed with ${answer.status}: ${errorMessage(answer)} Try the call again shortly.`,
      answer.status,
      answer.body,
    );
  }
  return null;
}

export function createOpspadHttpClient(options: OpspadHttpOptions): OpspadHttpClient {
  const baseUrl = options.baseUrl.replace(/\/+$/, '');
  const headers = { authorization: `Bearer ${options.apiKey}`, accept: 'application/json' };
  const conversation = (id: string) => `${baseUrl}/v1/conversations/${encodeURIComponent(id)}`;

  const request = async (url: string, init: RequestInit): Promise<HttpAnswer> => {
    if (!options.apiKey) {
      throw new OpspadHttpError(
        "No opspad API key: set OPSPAD_API_KEY (or --key) in this MCP server's configuration to a key from `opspad keys create`, then restart it.",
      );
    }
    let response: Response;
    try {
      response = await fetch(url, init);
    } catch (error) {
      if (init.signal?.aborted) {
        throw error;
      }
      const cause = error instanceof Error ? ((error.cause as Error | undefined)?.message ?? error.message) : error;
      throw new OpspadHttpError(
        `opspad at ${baseUrl} did not answer (${String(cause)}). Start it (\`npx opspad start\`), or set OPSPAD_URL (or --url) in this MCP server's configuration to where it runs.`,
      );
    }
    const text = await response.text();
    let body: unknown = text;
    try {
      body = text ? JSON.parse(text) : null;
    } catch {
      // not JSON: passed on as text
    }
    return { status: response.status, ok: response.ok, body };
  };

  const get = async (url: string, what: string, signal?: AbortSignal): Promise<unknown> => {
    const answer = await request(url, { headers, signal });
    if (!answer.ok) {
      throw (
        sessionProblem(baseUrl, answer, what) ??
        new OpspadHttpError(`${what} failed with ${answer.status}: ${errorMessage(answer)}`, answer.status, answer.body)
      );
    }
    return answer.body;
  };

  return {
    baseUrl,
    async listTools(signal) {
      const body = (await get(`${baseUrl}/v1/tools`, 'GET /v1/tools', signal)) as { tools?: unknown };
      if (!Array.isArray(body?.tools)) {
        throw new OpspadHttpError(`GET /v1/tools at ${baseUrl} did not answer with {tools: [...]}`);
      }
      return body.tools as ToolDefinition[];
    },
    callTool(conversationId, name, input, signal) {
      return request(`${conversation(conversationId)}/tools/${encodeURIComponent(name)}`, {
        method: 'POST',
        headers: { ...headers, 'content-type': 'application/json' },
        body: JSON.stringify(input ?? {}),
        signal,
      });
    },
    async context(conversationId, { others }, signal) {
      const query = others ? '?other_conversations=true' : '';
      const body = (await get(
        `${conversation(conversationId)}/context${query}`,
        'GET context',
        signal,
      )) as ContextAnswer;
      if (typeof body?.text !== 'string' || !Array.isArray(body.operations)) {
        throw new OpspadHttpError('the context fragment has no text');
      }
      return body;
    },
    async operations(conversationId, { before, limit }, signal) {
      const query = new URLSearchParams({ limit: String(limit), ...(before ? { before } : {}) });
      const body = (await get(
        `${conversation(conversationId)}/operations?${query}`,
        'GET operations',
        signal,
      )) as OperationsPageAnswer;
      if (!Array.isArray(body?.operations)) {
        throw new OpspadHttpError('GET operations did not answer with {operations: [...]}');
      }
      return body;
    },
    decideApproval(operationId, decision, signal) {
      return request(`${baseUrl}/v1/operations/${encodeURIComponent(operationId)}/approval`, {
        method: 'POST',
        headers: { ...headers, 'content-type': 'application/json' },
        body: JSON.stringify({ decision }),
        signal,
      });
    },
    async operation(operationId, signal) {
      const answer = await request(`${baseUrl}/v1/operations/${encodeURIComponent(operationId)}`, { headers, signal });
      if (answer.status === 404 || answer.status === 400) {
        return null;
      }
      if (!answer.ok) {
        throw (
          sessionProblem(baseUrl, answer, 'GET /v1/operations/:id') ??
          new OpspadHttpError(`GET /v1/operations/${operationId} failed with ${answer.status}: ${errorMessage(answer)}`)
        );
      }
      const { conversation_id: id, status } = (answer.body ?? {}) as { conversation_id?: unknown; status?: unknown };
      return typeof id === 'string' && typeof status === 'string' ? { conversation_id: id, status } : null;
    },
  };
}
