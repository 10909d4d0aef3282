/**
 * The HTTP side of `opspad mcp`: the running opspad's tool definitions, tool calls and context
 * fragment for one conversation, with the organization's API key.
 */
import type { ToolDefinition } from '../tools/definitions.ts';

export interface OpspadHttpOptions {
  /** e.g. `http://127.0.0.1:3000` */
  baseUrl: string;
  apiKey: string;
  conversationId: string;
}

/** An answer of opspad: its status and JSON body (or the text, when it is not JSON). */
export interface HttpAnswer {
  status: number;
  ok: boolean;
  body: unknown;
}

/** A request opspad refused or could not serve, where no answer can be passed on. */
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

export interface OpspadHttpClient {
  readonly baseUrl: string;
  /** `GET /v1/tools`: also proves the URL and the key work. */
  listTools(signal?: AbortSignal): Promise<ToolDefinition[]>;
  /** `POST /v1/conversations/:id/tools/:name`; an error status is an answer too, not a throw. */
  callTool(name: string, input: unknown, signal?: AbortSignal): Promise<HttpAnswer>;
  /** `GET /v1/conversations/:id/context`: the fragment's markdown `text`. */
  contextText(signal?: AbortSignal): Promise<string>;
}

function errorMessage(answer: HttpAnswer): string {
  const error = (answer.body as { error?: { message?: unknown } } | null)?.error;
  return typeof error?.message === 'string' ? error.message : JSON.stringify(answer.body);
}

export function createOpspadHttpClient(options: OpspadHttpOptions): OpspadHttpClient {
  const baseUrl = options.baseUrl.replace(/\/+$/, '');
  const conversation = `${baseUrl}/v1/conversations/${encodeURIComponent(options.conversationId)}`;
  const headers = { authorization: `Bearer ${options.apiKey}`, accept: 'application/json' };

  const request = async (url: string, init: RequestInit): Promise<HttpAnswer> => {
    let response: Response;
    try {
      response = await fetch(url, init);
    } catch (error) {
      if (init.signal?.aborted) {
        throw error;
      }
      const cause = error instanceof Error ? ((error.cause as Error | undefined)?.message ?? error.message) : error;
      throw new OpspadHttpError(`opspad at ${baseUrl} did not answer: ${String(cause)}`);
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
      throw new OpspadHttpError(
        `${what} failed with ${answer.status}: ${errorMessage(answer)}`,
        answer.status,
        answer.body,
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
    callTool(name, input, signal) {
      return request(`${conversation}/tools/${encodeURIComponent(name)}`, {
        method: 'POST',
        headers: { ...headers, 'content-type': 'application/json' },
        body: JSON.stringify(input ?? {}),
        signal,
      });
    },
    async contextText(signal) {
      const body = (await get(`${conversation}/context`, 'GET context', signal)) as { text?: unknown };
      if (typeof body?.text !== 'string') {
        throw new OpspadHttpError('the context fragment has no text');
      }
      return body.text;
    },
  };
}
