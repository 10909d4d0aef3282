/**
 * `update_scratchpad`: the model's way to keep its structured working memory — goals, open
 * items, facts (each citing a ref) and refs. Every call makes a new version; with
 * `expected_version`, a call based on a stale read is refused instead of overwriting.
 */

import { completePad } from '../domain/scratchpad.ts';
import { applyUpdate, checkPadInputSize, UpdateScratchpadInput } from '../domain/scratchpad-input.ts';
import { DEFAULT_SIZE_LIMITS, type SizeLimits } from '../domain/size-limits.ts';
import { parseOrThrow } from '../domain/validation.ts';
import { type ConversationScope, type Database, writePad } from '../store/index.ts';
import type { ToolCallContext, ToolResult } from './operation-tool.ts';

export const UPDATE_SCRATCHPAD_TOOL = 'update_scratchpad';

export interface ScratchpadToolDeps {
  db: Database;
  reciteBudget: number;
  /** OPSPAD_MAX_SCRATCHPAD_BYTES (the rest is the operation tool's). */
  sizeLimits?: SizeLimits;
  /** Called when the pad's cadence says a reorganization is due (e.g. to enqueue one). */
  onReorganizeDue?(scope: ConversationScope, version: number): Promise<void>;
}

export async function executeUpdateScratchpad(
  deps: ScratchpadToolDeps,
  ctx: ToolCallContext,
  rawInput: unknown,
): Promise<ToolResult> {
  const maxPadBytes = (deps.sizeLimits ?? DEFAULT_SIZE_LIMITS).scratchpadBytes;
  checkPadInputSize(rawInput, ['add', 'replace'], maxPadBytes);
  const input = parseOrThrow(UpdateScratchpadInput, rawInput, `${UPDATE_SCRATCHPAD_TOOL} input`);
  const result = await writePad(deps.db, ctx.scope, {
    expectedVersion: input.expected_version,
    build: (current) => completePad(applyUpdate(current, input), input.task),
    source: 'tool',
    reason: input.reason ?? 'update_scratchpad',
    metadata: { actor: ctx.actor },
    reciteBudget: deps.reciteBudget,
    maxBytes: maxPadBytes,
  });
  if (result.reorganizeDue) {
    await deps.onReorganizeDue?.(ctx.scope, result.version);
  }
  return { version: result.version, counts: result.counts, reorganization_queued: result.reorganizeDue };
}
