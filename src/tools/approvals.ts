/**
 * A person's decision on an operation awaiting approval (the admin API, the operator view's
 * buttons, the user's answer to an MCP elicitation). Not a tool action: a model must never
 * approve its own operation. Approval dispatches the operation as a create would.
 */
import type { OperationCounts, OperationRecord } from '../domain/operation.ts';
import { approveOperation, type ConversationScope, rejectOperation } from '../store/index.ts';
import type { OperationToolDeps } from './operation-tool.ts';

export type ApprovalDecision = 'approve' | 'reject';

export interface DecidedOperation extends OperationCounts {
  operation_id: string;
  status: OperationRecord['status'];
  operation_type: string;
}

/** Carries out `decision` as `actor`; refuses (409) an operation that no longer awaits approval. */
export async function decideApproval(
  deps: Pick<OperationToolDeps, 'db' | 'maxActiveBackground' | 'onActivated'>,
  scope: ConversationScope,
  operationId: string,
  decision: ApprovalDecision,
  actor: string,
): Promise<DecidedOperation> {
  const { operation, counts } =
    decision === 'approve'
      ? await approveOperation(deps.db, scope, operationId, { actor, maxActiveBackground: deps.maxActiveBackground })
      : await rejectOperation(deps.db, scope, operationId, { actor });
  if (decision === 'approve' && operation.status === 'active') {
    await deps.onActivated?.(operation);
  }
  return {
    operation_id: operation.id,
    status: operation.status,
    operation_type: operation.operation_type,
    ...counts,
  };
}
