/**
 * Which conversation each call of an `opspad mcp` session goes to. MCP tells a server nothing
 * about chats, and clients differ: some start one server per chat, others (desktop apps) share
 * one between all their chats. So:
 *
 * - `--conversation <uuid>`: every call goes to that conversation (creates pause its active
 *   operation, as in the HTTP API).
 * - Without it (session mode), the process has a home conversation of its own (a new UUID): a
 *   server per chat is a conversation per chat. The scratchpads and the context are the home's.
 *   `create` goes home unless the home already has an open operation; then it goes to a fresh
 *   conversation, so no create ever pauses an operation of another chat sharing the server.
 *
 * In both modes a call that names an operation goes to that operation's conversation (looked up
 * once by id within the organization), so an operation found in the context — this chat's, or
 * another conversation's — is continued by its id. In session mode, an action that may omit the
 * id (progress, get, pause) gets the id of the operation this session last created or named.
 */
import { randomUUID } from 'node:crypto';
import type { OpspadHttpClient } from './http-client.ts';

export const OPERATION_TOOL = 'manage_assistant_operation';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** Actions whose operation_id may be omitted: the session fills in its last operation. */
const ID_OPTIONAL = new Set(['progress', 'get', 'pause']);
const CREATES = new Set(['create']);

export interface RoutedCall {
  conversationId: string;
  input: unknown;
}

export interface ConversationRouter {
  /** `fixed` with --conversation, else `session`. */
  readonly mode: 'fixed' | 'session';
  /** The conversation of the scratchpads and the context. */
  readonly home: string;
  /** Where `name(input)` goes, and the input to send (an omitted operation_id filled in). */
  route(name: string, input: unknown, signal?: AbortSignal): Promise<RoutedCall>;
  /** Learns from an answer: the operation a create or retry made, and where. */
  answered(name: string, call: RoutedCall, body: unknown): void | Promise<void>;
  /** What the session learnt so far, for a session kept outside the process (src/api/mcp/). */
  memory(): SessionMemory;
}

/** What a session remembers between calls besides its home. */
export interface SessionMemory {
  /** The operation this session last created or named. */
  lastOperation: string | null;
  /** Operations this session created at home and has not yet seen closed. */
  homeOperations: readonly string[];
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export function createConversationRouter(
  client: OpspadHttpClient,
  options: {
    conversationId?: string;
    newConversationId?: () => string;
    /** Session mode with this home and what the session remembered (a session resumed). */
    resume?: { home: string; memory: SessionMemory };
  } = {},
): ConversationRouter {
  const newId = options.newConversationId ?? randomUUID;
  const home = options.conversationId ?? options.resume?.home ?? newId();
  const mode = options.conversationId ? 'fixed' : 'session';
  /** Where each operation this session has seen lives. */
  const conversations = new Map<string, string>();
  /** Operations this session created at home (session mode: the home is this process's alone). */
  const homeOperations = new Set<string>(options.resume?.memory.homeOperations);
  let lastOperation: string | undefined = options.resume?.memory.lastOperation ?? undefined;

  async function conversationOf(operationId: string, signal?: AbortSignal): Promise<string> {
    const known = conversations.get(operationId);
    if (known) {
      return known;
    }
    // Not found (or another organization's): sent home, where opspad answers 404 naming the id.
    const found = await client.operation(operationId, signal);
    const conversationId = found?.conversation_id ?? home;
    if (found) {
      conversations.set(operationId, conversationId);
    }
    return conversationId;
  }

  /** Whether an operation this session created at home is still active or paused. */
  async function homeHasOpenOperation(signal?: AbortSignal): Promise<boolean> {
    for (const operationId of homeOperations) {
      const found = await client.operation(operationId, signal);
      if (found && (found.status === 'active' || found.status === 'paused')) {
        return true;
      }
      homeOperations.delete(operationId);
    }
    return false;
  }

  return {
    mode,
    home,
    async route(name, input, signal) {
      if (name !== OPERATION_TOOL || !isRecord(input)) {
        return { conversationId: home, input };
      }
      const { action, operation_id: operationId } = input;
      if (typeof operationId === 'string' && UUID.test(operationId)) {
        lastOperation = operationId.toLowerCase();
        return { conversationId: await conversationOf(lastOperation, signal), input };
      }
      // With --conversation, an omitted id means the conversation's active operation, as in HTTP.
      if (
        mode === 'session' &&
        typeof action === 'string' &&
        ID_OPTIONAL.has(action) &&
        operationId == null &&
        lastOperation
      ) {
        return {
          conversationId: await conversationOf(lastOperation, signal),
          input: { ...input, operation_id: lastOperation },
        };
      }
      if (mode === 'session' && typeof action === 'string' && CREATES.has(action)) {
        return { conversationId: (await homeHasOpenOperation(signal)) ? newId() : home, input };
      }
      return { conversationId: home, input };
    },
    answered(name, call, body) {
      if (name !== OPERATION_TOOL || !isRecord(body) || typeof body.operation_id !== 'string') {
        return;
      }
      const operationId = body.operation_id.toLowerCase();
      conversations.set(operationId, call.conversationId);
      lastOperation = operationId;
      if (call.conversationId === home && isRecord(call.input) && CREATES.has(String(call.input.action))) {
        homeOperations.add(operationId);
      }
    },
    memory() {
      return { lastOperation: lastOperation ?? null, homeOperations: [...homeOperations] };
    },
  };
}
