/**
 * What the agent-framework adapters (`opspad/ai-sdk`, `opspad/openai-agents`) share: opspad's
 * tools as plain specs — name, description, JSON Schema, and a call through `opspad/client` into
 * one conversation — plus `read_working_memory`, and the working memory text for the system
 * prompt. Each adapter only wraps these in its framework's tool type.
 *
 * A refusal (4xx) is handed back to the model as opspad's error JSON, as `opspad mcp` does, so
 * it reads what was wrong and fixes its call; anything else (opspad unreachable) is thrown, and
 * the framework reports it as it reports any failing tool.
 */
import { type OpspadClient, OpspadError } from '../client/index.ts';
import type { ToolName } from '../client/types.ts';
import { type JsonSchema, toolDefinitions } from '../tools/definitions.ts';
import {
  EMPTY_WORKING_MEMORY,
  WORKING_MEMORY_TOOL_DESCRIPTION,
  WORKING_MEMORY_TOOL_NAME,
} from '../tools/working-memory-tool.ts';

export interface OpspadToolsOptions {
  /** An `opspad/client` client (its API key chooses the organization). */
  client: OpspadClient;
  /** The conversation the tools work in: one per chat or agent session, a UUID you choose. */
  conversationId: string;
}

export interface OpspadToolSpec {
  name: string;
  description: string;
  /** The tool's input as JSON Schema (draft 2020-12), as `GET /v1/tools` serves it. */
  parameters: JsonSchema;
  /** Runs the call as the model made it; resolves with what the model should read back. */
  call(input: unknown, signal?: AbortSignal): Promise<unknown>;
}

/** The working memory for the system prompt: open operations with their next call, and the pad. */
export async function workingMemory({ client, conversationId }: OpspadToolsOptions): Promise<string> {
  const fragment = await client.context.get(conversationId);
  return fragment.text || EMPTY_WORKING_MEMORY;
}

/** opspad's refusal as the model should read it, or the error itself when it is not one. */
function refusalOf(error: unknown): {
  error: { code: string; message: string; details: Readonly<Record<string, unknown>> };
} {
  if (error instanceof OpspadError && error.status >= 400 && error.status < 500) {
    return { error: { code: error.code, message: error.message, details: error.details } };
  }
  throw error;
}

/** The operation tool, the scratchpad tools and `read_working_memory`, bound to one conversation. */
export function opspadToolSpecs(options: OpspadToolsOptions): OpspadToolSpec[] {
  const { client, conversationId } = options;
  const tools = toolDefinitions().map(
    (definition): OpspadToolSpec => ({
      name: definition.name,
      description: definition.description,
      parameters: definition.input_schema,
      call: (input, signal) =>
        client.tools.call(conversationId, definition.name as ToolName, input ?? {}, { signal }).catch(refusalOf),
    }),
  );
  return [
    ...tools,
    {
      name: WORKING_MEMORY_TOOL_NAME,
      description: WORKING_MEMORY_TOOL_DESCRIPTION,
      parameters: { type: 'object', properties: {}, additionalProperties: false },
      call: () => workingMemory(options),
    },
  ];
}
