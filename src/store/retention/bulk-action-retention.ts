/**
 * Retention of operator bulk actions: an action is kept as long as the audit events it caused
 * (OPSPAD_RETENTION_EVENTS), then deleted with its targets, one action (at most
 * OPSPAD_MAX_BULK_OPERATIONS targets) per step. A stage of retention.ts's run.
 */

import type { RetentionPolicy } from '../../domain/retention.ts';
import type { Database } from '../db/db.ts';
import { deleteBulkAction, finishedBulkActionsDue } from './retention-sql.ts';

/** What a stage uses of the run (retention.ts): its policy, clock and bookkeeping. */
export interface RetentionStageRun {
  readonly policy: RetentionPolicy;
  check(): void;
  step<T>(run: () => Promise<T>): Promise<T>;
  pruned(table: 'operator_bulk_action_target', rows: number): void;
}

/** Actions one query fetches. */
const CANDIDATES = 50;

export async function pruneBulkActions(db: Database, run: RetentionStageRun): Promise<void> {
  const afterMs = run.policy.eventsAfterMs;
  if (afterMs === null) {
    return;
  }
  for (;;) {
    run.check();
    const due = await finishedBulkActionsDue(db, afterMs, CANDIDATES);
    for (const id of due) {
      run.pruned('operator_bulk_action_target', await run.step(() => db.transaction((tx) => deleteBulkAction(tx, id))));
    }
    if (due.length < CANDIDATES) {
      return;
    }
  }
}
