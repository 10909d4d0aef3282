/**
 * The context fragment: what an assistant puts at the tail of its system prompt every turn,
 * rebuilt from the database so it is never evicted with earlier messages — the open operations
 * (their own 2,000-character budget) and the recited scratchpad (OPSPAD_RECITE_MAX_CHARS).
 * Its cost is bounded whatever the conversation holds, and each render is recorded (pad
 * version, size, hash) so an operator can see what the assistant was told.
 */
import { createHash } from 'node:crypto';
import { OPERATIONS_BUDGET_CHARS, type OperationSummary, renderOperations } from '../domain/context-render.ts';
import { recitePad } from '../domain/recitation.ts';
import {
  type ConversationScope,
  conversationExists,
  type Database,
  getPad,
  getRecitation,
  listOpenOperations,
  recordContextRender,
} from '../store/index.ts';

/** More than ever fit in the budget: the rest are only counted. */
const MAX_LOADED_OPERATIONS = 50;

export interface ContextFragment {
  text: string;
  operations: OperationSummary[];
  operations_total: number;
  scratchpad: { version: number; chars: number; budget: number };
}

async function recitation(db: Database, scope: ConversationScope, budget: number) {
  const stored = await getRecitation(db, scope);
  if (stored.version === 0) {
    return { version: 0, text: '' };
  }
  if (stored.recitation?.budget === budget) {
    return { version: stored.version, text: stored.recitation.text };
  }
  // Rendered under another budget (the setting changed): render again from the pad.
  const pad = await getPad(db, scope);
  return { version: pad.version, text: recitePad(pad.pad, pad.version, budget).text };
}

export async function buildContextFragment(
  db: Database,
  scope: ConversationScope,
  reciteBudget: number,
): Promise<ContextFragment> {
  // The existence check runs beside the reads (one round trip instead of two, on every turn).
  // Every read is scoped by (organization, conversation): an id only another organization uses
  // is, for this one, an id not used yet, and answers exactly as one.
  const [exists, page, pad] = await Promise.all([
    conversationExists(db, scope),
    listOpenOperations(db, scope, MAX_LOADED_OPERATIONS),
    recitation(db, scope, reciteBudget),
  ]);
  if (!exists) {
    // Not used yet: nothing to recite, and nothing is created by reading.
    return {
      text: '',
      operations: [],
      operations_total: 0,
      scratchpad: { version: 0, chars: 0, budget: reciteBudget },
    };
  }
  const operations = renderOperations(page.operations, page.total, OPERATIONS_BUDGET_CHARS);
  const text = [operations.text, pad.text].filter((part) => part.length > 0).join('\n\n');
  await recordContextRender(db, scope, {
    padVersion: pad.version,
    chars: text.length,
    sha256: createHash('sha256').update(text).digest('hex'),
  });
  return {
    text,
    operations: operations.shown,
    operations_total: page.total,
    scratchpad: { version: pad.version, chars: pad.text.length, budget: reciteBudget },
  };
}
