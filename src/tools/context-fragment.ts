/**
 * The context fragment: what an assistant puts in its system prompt every turn, rebuilt from
 * the database so it is never evicted with earlier messages. Its cost is bounded: at most
 * {@link MAX_LOADED_OPERATIONS} operations are loaded, whatever the conversation holds.
 */
import { OPERATIONS_BUDGET_CHARS, type OperationSummary, renderOperations } from '../domain/context-render.ts';
import {
  type ConversationScope,
  conversationNotFound,
  conversationOwner,
  type Database,
  listOpenOperations,
} from '../store/index.ts';

/** More than ever fit in the budget: the rest are only counted. */
const MAX_LOADED_OPERATIONS = 50;

export interface ContextFragment {
  text: string;
  operations: OperationSummary[];
  operations_total: number;
}

export async function buildContextFragment(db: Database, scope: ConversationScope): Promise<ContextFragment> {
  const owner = await conversationOwner(db, scope.conversationId);
  if (owner === null) {
    // Not used yet: nothing to recite, and nothing is created by reading.
    return { text: '', operations: [], operations_total: 0 };
  }
  if (owner !== scope.organizationId) {
    throw conversationNotFound(scope.conversationId);
  }
  const page = await listOpenOperations(db, scope, MAX_LOADED_OPERATIONS);
  const rendered = renderOperations(page.operations, page.total, OPERATIONS_BUDGET_CHARS);
  return { text: rendered.text, operations: rendered.shown, operations_total: page.total };
}
