/**
 * A batch's items that its time budget cut short, and that have now been leased as often as the
 * handler allows, fail with why (run-step.ts calls this before recording the batch).
 */
import { HANDLER_DEFAULTS } from '../../handlers/registry.ts';
import type { Handler } from '../../handlers/types.ts';
import { type ConversationScope, type Database, leaseCountsOf } from '../../store/index.ts';
import type { BudgetedOutcome } from './run-within-budget.ts';

/**
 * Items the budget cut short that have now been leased `attempts` times fail, with why: without
 * this, an item whose handling never fits in a budget would be handed out forever. The others
 * go back to pending with the rest.
 */
export async function failExhausted(
  db: Database,
  scope: ConversationScope,
  operationId: string,
  owner: string,
  handler: Handler,
  budgetMs: number,
  outcome: BudgetedOutcome,
): Promise<BudgetedOutcome> {
  if (outcome.exhausted.length === 0) {
    return outcome;
  }
  const limit = handler.attempts ?? HANDLER_DEFAULTS.attempts;
  const leases = await leaseCountsOf(db, scope, operationId, owner, outcome.exhausted);
  const spent = [...leases].filter(([, count]) => count >= limit);
  if (spent.length === 0) {
    return outcome;
  }
  const last = outcome.lastError ? `; last error: ${outcome.lastError}` : '';
  const failed = spent.map(([id, count]) => ({
    id,
    reason: `no result within the batch time budget (${budgetMs} ms) in ${count} tries${last}`.slice(0, 2000),
  }));
  const spentIds = new Set(spent.map(([id]) => id));
  return {
    ...outcome,
    failed: [...outcome.failed, ...failed],
    unhandled: outcome.unhandled.filter((id) => !spentIds.has(id)),
  };
}
