/**
 * Consent through the MCP client: when `create` answers `awaiting_approval` (the organization
 * asks a person to approve operations of that size) and the client declared form elicitation,
 * the server asks the user "Send N items for operation …?" before it answers the call, and
 * records the answer through opspad (`POST /v1/operations/:id/approval`, as the user). Meanwhile
 * the operation's task, if the call made one, reads `input_required` (operation-task.ts).
 *
 * | the user                  | the operation                                     |
 * |---------------------------|---------------------------------------------------|
 * | accepts, send = true      | approved: it starts                               |
 * | accepts, send = false     | rejected: cancelled                               |
 * | declines                  | rejected: cancelled                               |
 * | dismisses (cancel)        | still awaits approval (admin API, operator view)  |
 */
import type { Server } from '@modelcontextprotocol/sdk/server/index.js';
import type { ApprovalDecision } from '../tools/approvals.ts';

export interface AwaitingOperation {
  operation_id: string;
  operation_type: string;
  total_items: number;
}

/** Whether the client can be asked. */
export function canAsk(server: Server): boolean {
  return server.getClientCapabilities()?.elicitation?.form !== undefined;
}

/** The question, as the user sees it. */
export function approvalQuestion(op: AwaitingOperation): string {
  return `Send ${op.total_items.toLocaleString('en-US')} items for operation ${op.operation_id} (${op.operation_type})? Your organization asks a person to approve operations of this size.`;
}

/** Asks the user; null when they dismissed the question without answering. */
export async function askApproval(
  server: Server,
  op: AwaitingOperation,
  signal?: AbortSignal,
): Promise<ApprovalDecision | null> {
  const answer = await server.elicitInput(
    {
      mode: 'form',
      message: approvalQuestion(op),
      requestedSchema: {
        type: 'object',
        properties: {
          send: {
            type: 'boolean',
            title: 'Send them',
            description: 'Yes starts the operation; no cancels it.',
          },
        },
        required: ['send'],
      },
    },
    { signal },
  );
  switch (answer.action) {
    case 'accept':
      return answer.content?.send === true ? 'approve' : 'reject';
    case 'decline':
      return 'reject';
    default:
      return null;
  }
}
