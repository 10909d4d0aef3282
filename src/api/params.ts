/** Validation of path parameters, with the same error shape as bodies. */
import { z } from 'zod';
import { parseOrThrow } from '../domain/validation.ts';

const ConversationParams = z.object({
  conversationId: z.guid({ error: 'must be a UUID chosen by the caller for the conversation' }),
});

export function conversationIdOf(params: unknown): string {
  return parseOrThrow(ConversationParams, params, 'path').conversationId.toLowerCase();
}
