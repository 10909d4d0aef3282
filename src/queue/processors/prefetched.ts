/**
 * A batch leased by the call that recorded the lane's previous batch (run-batch.ts,
 * opspad_record_lease_step), with the stop watch taken before that call, so a pause or
 * cancel sent as soon as it committed reaches the batch's handler.
 */
import type { LeaseResult } from '../../store/index.ts';
import { releaseLeasedItems } from '../../store/index.ts';
import type { RunBatchPayload } from '../catalog.ts';
import type { RunBatchDeps } from './run-batch.ts';

export interface Prefetched {
  lease: LeaseResult;
  stop: ReturnType<RunBatchDeps['watchStop']>;
}

/** Gives a prefetched batch back unhandled (its items pending again) and stops its watch. */
export async function giveBack(
  deps: Pick<RunBatchDeps, 'db' | 'logger'>,
  step: RunBatchPayload,
  owner: string,
  prefetched: Prefetched,
): Promise<void> {
  prefetched.stop.release();
  const scope = { organizationId: step.organization_id, conversationId: step.conversation_id };
  await releaseLeasedItems(deps.db, scope, step.operation_id, owner, prefetched.lease.batch).catch((error: unknown) =>
    // Its lease expires by itself; giving it back early only saves time.
    deps.logger.warn({ err: error, operation_id: step.operation_id }, 'could not give a leased batch back'),
  );
}
