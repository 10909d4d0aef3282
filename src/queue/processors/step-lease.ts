/**
 * A batch step's own lease (`leaseBatch`: one call in the usual case, the general transaction
 * otherwise), traced and timed, when the record of the lane's previous batch did not lease it
 * already (run-batch.ts, lane-slice.ts).
 */
import { AppError } from '../../domain/errors.ts';
import type { Handler } from '../../handlers/types.ts';
import { type LeaseResult, leaseBatch } from '../../store/index.ts';
import { ATTR, inSpan } from '../../telemetry/spans.ts';
import type { RunBatchPayload } from '../catalog.ts';
import type { RunBatchDeps } from './run-batch.ts';

/** The step's own lease, when the previous batch's record did not lease it; null: deleted. */
export async function leaseForStep(
  deps: RunBatchDeps,
  scope: { organizationId: string; conversationId: string },
  step: RunBatchPayload,
  owner: string,
  handler: Handler,
  /** At most this many items (the batch's grant under its key's limits). */
  batchSize?: number,
): Promise<LeaseResult | null> {
  const leaseTimer = deps.metrics.leaseDuration.startTimer({ operation_type: step.operation_type });
  try {
    return await inSpan('lease batch', {}, async (span) => {
      const leased = await leaseBatch(deps.db, scope, {
        operationId: step.operation_id,
        owner,
        leaseSeconds: deps.leaseSeconds,
        batchSize: batchSize ?? handler.batchSize,
        epoch: step.epoch,
      });
      span.setAttributes({ [ATTR.batchSize]: leased.batch.length, [ATTR.reclaimed]: leased.reclaimed });
      return leased;
    });
  } catch (error) {
    if (error instanceof AppError && error.code === 'not_found') {
      return null;
    }
    throw error;
  } finally {
    leaseTimer();
  }
}
