/**
 * The context fragment: what an assistant reads every turn (at the tail of its system prompt,
 * or from the read_working_memory tool of `opspad mcp`), rebuilt from the database so it is
 * never evicted with earlier messages — the open operations and the recited scratchpad. It
 * costs at most OPSPAD_CONTEXT_MAX_TOKENS tokens (o200k) whatever the conversation holds, and
 * each render is recorded (pad version, size, hash) so an operator can see what the assistant
 * was told.
 */
import { createHash } from 'node:crypto';
import { type ComposedContext, composeContext } from '../domain/context-compose.ts';
import type { OperationSummary } from '../domain/context-render.ts';
import { legacyPausedBy } from '../domain/paused-by.ts';
import { RECITATION_FORMAT, type RecitationSelection, recitePad } from '../domain/recitation.ts';
import {
  type ContextInputs,
  type ConversationScope,
  type Database,
  getPad,
  lastPauseActors,
  listOpenOperationsInOrganization,
  readContextInputs,
  recordContextRender,
  throttlesOf,
} from '../store/index.ts';
import { countTokens } from './tokens.ts';

/** More than ever fit in the budget: the rest are only counted. */
const MAX_LOADED_OPERATIONS = 50;

export interface ContextFragment {
  text: string;
  /** The text's size in o200k tokens (counted line by line: never below the true count). */
  tokens: number;
  operations: OperationSummary[];
  operations_total: number;
  /** Present when asked for: open operations of the organization's other conversations. */
  other_operations?: OperationSummary[];
  other_operations_total?: number;
  scratchpad: { version: number; chars: number; budget: number };
}

export interface ContextBudgets {
  /** OPSPAD_RECITE_MAX_CHARS: what of the pad is selected when it is written. */
  reciteChars: number;
  /** OPSPAD_CONTEXT_MAX_TOKENS: the whole fragment. */
  maxTokens: number;
}

/** The recitation to show: the stored one, unless it was rendered under another budget or format. */
async function recitation(
  db: Database,
  scope: ConversationScope,
  stored: ContextInputs['pad'],
  budget: number,
): Promise<{ version: number; selection: RecitationSelection | null }> {
  if (stored.version === 0) {
    return { version: 0, selection: null };
  }
  const current = stored.recitation;
  if (current?.budget === budget && current.format === RECITATION_FORMAT && current.selection) {
    return { version: stored.version, selection: current.selection };
  }
  // Rendered under another budget or an older format: select again from the pad.
  const pad = await getPad(db, scope);
  return { version: pad.version, selection: recitePad(pad.pad, pad.version, budget).selection };
}

/** `paused_by` of the paused operations that predate it, from their audit trail. */
async function legacyPausers(
  db: Database,
  organizationId: string,
  operations: readonly { id: string; status: string; state_json: { paused_by?: string; paused_reason?: string } }[],
): Promise<Map<string, string>> {
  const legacy = operations.filter((op) => op.status === 'paused' && op.state_json.paused_by === undefined);
  const actors = await lastPauseActors(
    db,
    organizationId,
    legacy.map((op) => op.id),
  );
  const pausers = new Map<string, string>();
  for (const op of legacy) {
    const by = legacyPausedBy(op.state_json.paused_reason, actors.get(op.id));
    if (by) {
      pausers.set(op.id, by);
    }
  }
  return pausers;
}

export async function buildContextFragment(
  db: Database,
  scope: ConversationScope,
  budgets: ContextBudgets,
  options: { otherConversations?: boolean } = {},
): Promise<ContextFragment> {
  // The conversation's own inputs are one statement (store/operations/context-reads.ts). Every read is
  // scoped by (organization, conversation): an id only another organization uses is, for this
  // one, an id not used yet, and answers exactly as one.
  const [inputs, others, count] = await Promise.all([
    readContextInputs(db, scope, MAX_LOADED_OPERATIONS),
    options.otherConversations
      ? listOpenOperationsInOrganization(db, scope.organizationId, {
          exceptConversationId: scope.conversationId,
          limit: MAX_LOADED_OPERATIONS,
        })
      : undefined,
    countTokens(),
  ]);
  const exists = inputs.exists;
  const pad = exists ? await recitation(db, scope, inputs.pad, budgets.reciteChars) : { version: 0, selection: null };
  const own = exists ? inputs.page : { operations: [], total: 0 };
  const listed = [...own.operations, ...(others?.operations ?? [])];
  const running = listed.filter((op) => op.status === 'active' && op.state_json.execution === 'background');
  const [pausedBy, throttled] = await Promise.all([
    legacyPausers(db, scope.organizationId, listed),
    throttlesOf(
      db,
      scope,
      running.map((op) => op.id),
    ),
  ]);
  const composed: ComposedContext = composeContext({
    operations: own.operations,
    total: own.total,
    pausedBy,
    throttled,
    others,
    recitation: exists ? pad.selection : null,
    budgetTokens: budgets.maxTokens,
    count,
  });
  const text = composed.text;
  if (exists) {
    // Not used yet: nothing recited, and nothing is created (or recorded) by reading.
    await recordContextRender(db, scope, {
      padVersion: pad.version,
      chars: text.length,
      sha256: createHash('sha256').update(text).digest('hex'),
    });
  }
  return {
    text,
    tokens: composed.tokens,
    operations: composed.operations,
    operations_total: own.total,
    ...(others ? { other_operations: composed.other_operations, other_operations_total: others.total } : {}),
    scratchpad: {
      version: exists ? pad.version : 0,
      chars: exists ? (pad.selection?.chars ?? 0) : 0,
      budget: budgets.reciteChars,
    },
  };
}
