/**
 * One reorganization of a conversation's pad, as seed-style events record it:
 * - the reorganizer's output is schema-checked and every ref it keeps must be among the allowed
 *   refs (the pad's refs, the recent messages, the conversation's operations); a rejected output
 *   is retried up to `schema_retries` times, then the old version stays and an event says why
 *   (`invalid_sources`, `llm_error`);
 * - the result is saved only against the version it read (compare-and-swap): a write that landed
 *   during a slow model call is never overwritten — the work is redone once on the new version,
 *   then dropped with a `superseded` event;
 * - a failure to save is `store_error`; success is `reorganized`, with before/after counts.
 */
import { AppError } from '../domain/errors.ts';
import {
  citationIssues,
  completePad,
  countsOfPad,
  mergeRefs,
  messageRefs,
  type Pad,
  type PadCounts,
  type PadRef,
  ReorganizedPad,
} from '../domain/scratchpad.ts';
import type { SizeLimits } from '../domain/size-limits.ts';
import type { Logger } from '../logger.ts';
import {
  appendScratchpadEvent,
  type ConversationScope,
  type Database,
  getPad,
  listConversationOperations,
  markReorganized,
  type Queryable,
  type ScratchpadEventStatus,
  writePad,
} from '../store/index.ts';
import type { Reorganizer } from './providers.ts';
import { yieldToEventLoop } from './slices.ts';

export interface ReorganizeDeps {
  db: Database;
  reorganizer: Reorganizer;
  reciteBudget: number;
  logger: Logger;
  /** OPSPAD_MAX_SCRATCHPAD_BYTES: what a reorganization (or a write over the API) may store. */
  sizeLimits?: SizeLimits;
}

export interface ReorganizeOptions {
  reason: string;
  /** The conversation's recent messages, which the reorganizer may cite as `turn:N`. */
  recentMessages?: readonly { role: string; content: string }[];
  signal?: AbortSignal;
}

export interface ReorganizeOutcome {
  status: ScratchpadEventStatus;
  version?: number;
  before_counts?: PadCounts;
  after_counts?: PadCounts;
  errors?: string[];
  error?: string;
}

/** Refs for the conversation's 20 most recent operations, so facts can cite where they came from. */
async function operationRefs(db: Queryable, scope: ConversationScope): Promise<PadRef[]> {
  const { operations } = await listConversationOperations(db, scope, { limit: 20 });
  return operations.map((r) => ({
    id: `operation:${r.id}`,
    kind: 'operation',
    label: `${r.operation_type}, ${r.status}, ${r.completed_count + r.failed_count}/${r.total_items} recorded`,
  }));
}

type Attempt = { ok: true; pad: Pad; dropped: string[] } | { ok: false; outcome: ReorganizeOutcome };

async function propose(
  deps: ReorganizeDeps,
  pad: Pad,
  version: number,
  allowedRefs: PadRef[],
  options: ReorganizeOptions,
  retries: number,
): Promise<Attempt> {
  const allowedIds = new Set(allowedRefs.map((ref) => ref.id));
  let failure: ReorganizeOutcome = { status: 'llm_error', error: 'no attempt was made' };
  for (let attempt = 0; attempt <= retries; attempt++) {
    let raw: unknown;
    try {
      raw = await deps.reorganizer.reorganize(
        { pad, version, allowedRefs, context: { reason: options.reason }, budget: deps.reciteBudget },
        options.signal,
      );
    } catch (error) {
      failure = { status: 'llm_error', error: error instanceof Error ? error.message : String(error) };
      continue;
    }
    // The proposal is checked in the next turn of the loop, not in the one that made it.
    await yieldToEventLoop();
    const parsed = ReorganizedPad.safeParse(raw);
    if (!parsed.success) {
      const issues = parsed.error.issues.slice(0, 5).map((i) => `${i.path.join('.')}: ${i.message}`);
      failure = { status: 'llm_error', error: `the output does not match the scratchpad schema: ${issues.join('; ')}` };
      continue;
    }
    const { dropped = [], ...proposed } = parsed.data;
    const candidate = completePad(proposed);
    const issues = citationIssues(candidate, allowedIds);
    if (issues.length > 0) {
      failure = {
        status: 'invalid_sources',
        errors: issues.slice(0, 20).map((i) => `${i.field}: ${i.message}`),
        before_counts: countsOfPad(pad),
        after_counts: countsOfPad(candidate),
      };
      continue;
    }
    return { ok: true, pad: candidate, dropped };
  }
  return { ok: false, outcome: failure };
}

export async function reorganizeScratchpad(
  deps: ReorganizeDeps,
  scope: ConversationScope,
  options: ReorganizeOptions,
): Promise<ReorganizeOutcome> {
  const finish = async (outcome: ReorganizeOutcome): Promise<ReorganizeOutcome> => {
    await appendScratchpadEvent(deps.db, scope, outcome.status, {
      reason: options.reason,
      reorganizer: deps.reorganizer.name,
      ...outcome,
    });
    return outcome;
  };
  for (let round = 0; round < 2; round++) {
    const stored = await getPad(deps.db, scope);
    if (stored.version === 0) {
      return finish({ status: 'missing_scratchpad' });
    }
    const allowedRefs = mergeRefs(
      stored.pad.refs,
      messageRefs(options.recentMessages ?? [], stored.settings.max_recent_messages),
      await operationRefs(deps.db, scope),
    );
    const proposal = await propose(
      deps,
      stored.pad,
      stored.version,
      allowedRefs,
      options,
      stored.settings.schema_retries,
    );
    if (!proposal.ok) {
      if (proposal.outcome.status === 'invalid_sources') {
        // The same version would be rejected the same way: the sweep waits for a change.
        await markReorganized(deps.db, scope, stored.version);
      }
      return finish(proposal.outcome);
    }
    const before = countsOfPad(stored.pad);
    try {
      const saved = await writePad(deps.db, scope, {
        expectedVersion: stored.version,
        build: () => proposal.pad,
        source: 'reorganizer',
        reason: options.reason,
        metadata: {
          reorganizer: deps.reorganizer.name,
          before_counts: before,
          based_on: stored.version,
          dropped: proposal.dropped,
        },
        isReorganization: true,
        reciteBudget: deps.reciteBudget,
        maxBytes: deps.sizeLimits?.scratchpadBytes,
      });
      return finish({
        status: 'reorganized',
        version: saved.version,
        before_counts: before,
        after_counts: saved.counts,
      });
    } catch (error) {
      if (error instanceof AppError && error.code === 'version_conflict') {
        if (round === 0) {
          deps.logger.info({ conversation_id: scope.conversationId }, 'pad changed during reorganization; redoing it');
          continue;
        }
        return finish({ status: 'superseded', error: error.message });
      }
      if (error instanceof AppError && error.code === 'validation_failed') {
        return finish({
          status: 'invalid_sources',
          errors: [error.message],
          before_counts: before,
          after_counts: countsOfPad(proposal.pad),
        });
      }
      return finish({ status: 'store_error', error: error instanceof Error ? error.message : String(error) });
    }
  }
  return finish({ status: 'superseded', error: 'the pad kept changing during reorganization' });
}
