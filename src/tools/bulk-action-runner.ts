/**
 * Runs operator bulk actions in the server process, after the POST that created one answered:
 * each target is claimed (store/operations/bulk-actions.ts), then applied through the operation
 * tool exactly as an operator's click on it would be (same rules, events, approval holds and
 * workers' pause/cancel signals), with the action's id in the audit event's data, and its
 * outcome recorded: applied, or skipped with the reason when the action does not apply to it now.
 *
 * A server also sweeps, at start and every `sweepMs`: it settles claims a stopped server left
 * and runs the actions still `running`, so an action a crash interrupted is finished by the next
 * server (or by another one already up). Two servers on one action take different targets.
 */
import { BULK_ACTIONS, type BulkActionName, skipBeforeApplying } from '../domain/bulk-action.ts';
import { AppError } from '../domain/errors.ts';
import type { Logger } from '../logger.ts';
import {
  type ClaimedTarget,
  claimBulkTargets,
  type Database,
  finishBulkActionIfDone,
  finishBulkTarget,
  getBulkAction,
  releaseBulkClaims,
  releaseStaleBulkTargets,
  runningBulkActions,
  targetOperation,
} from '../store/index.ts';
import { OPERATION_TOOL_NAME } from './operation-tool.ts';
import type { ToolRegistry } from './registry.ts';

export const BULK_SWEEP_MS = 30_000;
/**
 * Targets of one action applied at once (a pause is a few statements, mostly waiting on the
 * database). Pausing 2,000 operations took 14.0 s one at a time and 7.0 s four at a time;
 * 10,000 took 32.9 s (3.3 ms each), on a loaded 2-core machine.
 */
export const BULK_LANES = 4;
/**
 * Targets a lane claims at once: a few for pause and resume (a few statements each), one for
 * cancel and retry_failed, whose work grows with the operation's items, so that no claim waits
 * long behind another (a claim a minute old is another server's to settle).
 */
const CLAIM_BATCH: Record<BulkActionName, number> = { pause: 25, resume: 25, cancel: 1, retry_failed: 1 };

export interface BulkActionRunner {
  /** Runs the action's pending targets in the background (nothing if this server already is). */
  run(id: string): void;
  /** Settles stale claims and runs every running action; resolves when this sweep's runs end. */
  sweep(): Promise<void>;
  /** Sweeps now and then every `sweepMs`, until stopped. */
  start(): void;
  /** Takes no more targets; resolves once the ones being applied are recorded. */
  stop(): Promise<void>;
}

type Outcome = { state: 'applied' | 'skipped'; detail: string | null };

async function applyTarget(db: Database, tools: ToolRegistry, id: string, target: ClaimedTarget): Promise<Outcome> {
  const action = BULK_ACTIONS.find((known) => known === target.action);
  if (!action) {
    return { state: 'skipped', detail: `"${target.action}" is not an action this server knows` };
  }
  const op = await targetOperation(db, target);
  if (!op) {
    return { state: 'skipped', detail: 'the operation no longer exists' };
  }
  const skip = skipBeforeApplying(action, op.status);
  if (skip) {
    return { state: 'skipped', detail: skip };
  }
  try {
    await tools.execute(
      OPERATION_TOOL_NAME,
      { action, operation_id: target.operation_id },
      {
        scope: { organizationId: target.organization_id, conversationId: op.conversation_id },
        actor: target.actor,
        eventData: { bulk_action_id: id },
        // Another operation active in the conversation (another server may have resumed it just
        // now) makes the resume refuse, under the conversation's lock: a skip, never a pause of it.
        resumeOnlyIfNoneActive: true,
      },
    );
    return { state: 'applied', detail: null };
  } catch (error) {
    // A refusal of the tool (finished meanwhile, nothing to retry, a quota) is this target's
    // outcome; anything else leaves the claim to be settled by a sweep.
    if (error instanceof AppError && error.code !== 'internal_error' && error.code !== 'service_unavailable') {
      return { state: 'skipped', detail: error.message };
    }
    throw error;
  }
}

export function bulkActionRunner(deps: {
  db: Database;
  tools: ToolRegistry;
  logger: Logger;
  sweepMs?: number;
}): BulkActionRunner {
  const { db, tools, logger } = deps;
  const runs = new Map<string, Promise<void>>();
  let stopped = false;

  /** Claims and applies targets until none is left; each lane reads on from its own last one. */
  async function lane(id: string, action: BulkActionName): Promise<void> {
    let last: string | null = null;
    while (!stopped) {
      const claimed = await claimBulkTargets(db, id, last, CLAIM_BATCH[action] ?? 1);
      if (claimed.length === 0) {
        return;
      }
      last = claimed.at(-1)?.operation_id ?? last;
      // The first claim not taken up yet: on a stop, it and those after it go back to pending; a
      // claim whose apply failed stays claimed, for a sweep to settle from its audit trail.
      let next = 0;
      try {
        for (const target of claimed) {
          if (stopped) {
            break;
          }
          next += 1;
          const outcome = await applyTarget(db, tools, id, target);
          await finishBulkTarget(db, id, target, outcome);
        }
      } finally {
        await releaseBulkClaims(db, id, claimed.slice(next)).catch(() => {});
      }
    }
  }

  async function runAll(id: string): Promise<void> {
    const record = await getBulkAction(db, id);
    if (record?.status !== 'running') {
      return;
    }
    // Resumes one at a time: of two operations of one conversation, the first by id is resumed
    // and the other skipped (the resume's own transaction refuses it, on any server).
    const lanes = record.action === 'resume' ? 1 : BULK_LANES;
    // Every lane to its end, even when one fails: the run (and so stop()) covers the others.
    const settled = await Promise.allSettled(Array.from({ length: lanes }, () => lane(id, record.action)));
    const failed = settled.find((lane) => lane.status === 'rejected');
    if (failed) {
      throw failed.reason;
    }
    if (!stopped && (await finishBulkActionIfDone(db, id))) {
      logger.info({ bulk_action_id: id }, 'bulk action done');
    }
  }

  function run(id: string): Promise<void> {
    const existing = runs.get(id);
    if (existing || stopped) {
      return existing ?? Promise.resolve();
    }
    const running = runAll(id)
      .catch((error: unknown) => {
        logger.warn({ err: error, bulk_action_id: id }, 'bulk action interrupted; the next sweep goes on with it');
      })
      .finally(() => runs.delete(id));
    runs.set(id, running);
    return running;
  }

  async function sweep(): Promise<void> {
    try {
      await releaseStaleBulkTargets(db);
      await Promise.all((await runningBulkActions(db)).map((id) => run(id)));
    } catch (error) {
      logger.warn({ err: error }, 'bulk action sweep failed; the next one retries');
    }
  }

  let timer: NodeJS.Timeout | undefined;
  return {
    run(id) {
      void run(id);
    },
    sweep,
    start() {
      if (timer || stopped) {
        return;
      }
      void sweep();
      timer = setInterval(() => void sweep(), deps.sweepMs ?? BULK_SWEEP_MS);
      timer.unref();
    },
    async stop() {
      stopped = true;
      clearInterval(timer);
      await Promise.all(runs.values());
    },
  };
}
