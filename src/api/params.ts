/** Validation of path parameters, with the same error shape as bodies. */
import { z } from 'zod';
import { parseOrThrow } from '../domain/validation.ts';

export const ConversationParams = z.object({
  conversationId: z.guid({ error: 'must be a UUID chosen by the caller for the conversation' }),
});

export function conversationIdOf(params: unknown): string {
  return parseOrThrow(ConversationParams, params, 'path').conversationId.toLowerCase();
}

export const ExecutionHeader = z.guid({
  error: 'must be an execution_id returned by POST /v1/conversations/:id/executions',
});

/** The `X-Opspad-Execution` header, validated; undefined when absent. */
export function executionIdOf(header: string | undefined): string | undefined {
  if (header === undefined || header === '') {
    return undefined;
  }
  return parseOrThrow(z.object({ 'X-Opspad-Execution': ExecutionHeader }), { 'X-Opspad-Execution': header }, 'header')[
    'X-Opspad-Execution'
  ].toLowerCase();
}
