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
  claimBulkTarget,
  type Database,
  finishBulkActionIfDone,
  finishBulkTarget,
  releaseStaleBulkTargets,
  runningBulkActions,
} from '../store/index.ts';
import { OPERATION_TOOL_NAME } from './operation-tool.ts';
import type { ToolRegistry } from './registry.ts';

export const BULK_SWEEP_MS = 30_000;

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

async function applyTarget(tools: ToolRegistry, id: string, target: ClaimedTarget): Promise<Outcome> {
  if (!target.conversation_id || !target.status) {
    return { state: 'skipped', detail: 'the operation no longer exists' };
  }
  const action: BulkActionName = BULK_ACTIONS.includes(target.action) ? target.action : 'pause';
  const skip = skipBeforeApplying(action, target.status);
  if (skip) {
    return { state: 'skipped', detail: skip };
  }
  if (action === 'resume' && target.conversation_active_id) {
    return {
      state: 'skipped',
      detail: `operation ${target.conversation_active_id} is active in its conversation, and resuming this one would pause it; resume it on its own if that is meant`,
    };
  }
  try {
    await tools.execute(
      OPERATION_TOOL_NAME,
      { action, operation_id: target.operation_id },
      {
        scope: { organizationId: target.organization_id, conversationId: target.conversation_id },
        actor: target.actor,
        eventData: { bulk_action_id: id },
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

  async function runAll(id: string): Promise<void> {
    while (!stopped) {
      const target = await claimBulkTarget(db, id);
      if (!target) {
        break;
      }
      const outcome = await applyTarget(tools, id, target);
      await finishBulkTarget(db, id, target.operation_id, outcome);
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
