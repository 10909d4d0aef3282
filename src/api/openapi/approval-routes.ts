/** The admin API of consent (routes/admin-approvals.ts): approvals and each organization's policy. */
import {
  ApprovalList,
  ApprovalPolicyOutput,
  DecidedOutput,
  DecisionParams,
  ListQuery,
  PolicyBody,
  PolicyParams,
} from '../routes/admin-approvals.ts';
import type { RouteSpec } from './route-spec.ts';

const changeRule =
  'A change must come from this server’s origin (send `Origin: <its address>`), as the operator pages’ do; read-only mode refuses it.';

export const APPROVAL_ROUTES: RouteSpec[] = [
  {
    method: 'get',
    path: '/admin/approvals',
    operationId: 'admin_approvals',
    summary: 'Operations awaiting a person’s approval, oldest first',
    tag: 'Operator',
    auth: 'operator',
    query: ListQuery,
    responses: { 200: { description: 'At most 500.', json: { name: 'ApprovalList', schema: ApprovalList } } },
    errors: ['unauthorized', 'validation_failed'],
  },
  {
    method: 'post',
    path: '/admin/approvals/:operationId/:decision',
    operationId: 'admin_decide_approval',
    summary: 'Approve or reject an operation awaiting approval (a rejection cancels it)',
    description: `Recorded in the audit trail as \`approved\` or \`rejected\` by \`operator:<user>\`. ${changeRule} The operator view's buttons post a form and are sent back to the operation's page (303).`,
    tag: 'Operator',
    auth: 'operator',
    params: DecisionParams,
    responses: {
      200: {
        description: 'The operation after the decision.',
        json: { name: 'DecidedOperation', schema: DecidedOutput },
      },
      303: {
        description: 'From the operator view (a form): back to the operation’s page.',
        headers: { Location: { description: 'The operation’s page.', schema: { type: 'string' } } },
      },
    },
    errors: ['unauthorized', 'forbidden', 'validation_failed', 'not_found', 'operation_finished'],
  },
  {
    method: 'get',
    path: '/admin/approvals/policy/:organization',
    operationId: 'admin_approval_policy',
    summary: 'An organization’s approval policy',
    tag: 'Operator',
    auth: 'operator',
    params: PolicyParams,
    responses: { 200: { description: 'The policy.', json: { name: 'ApprovalPolicy', schema: ApprovalPolicyOutput } } },
    errors: ['unauthorized', 'validation_failed', 'not_found'],
  },
  {
    method: 'put',
    path: '/admin/approvals/policy/:organization',
    operationId: 'admin_set_approval_policy',
    summary: 'Sets an organization’s approval policy',
    description: `Background operations of more than \`approve_above\` items are created \`awaiting_approval\` and lease nothing until a person approves them; null: none wait. ${changeRule}`,
    tag: 'Operator',
    auth: 'operator',
    params: PolicyParams,
    body: { name: 'ApprovalPolicyBody', schema: PolicyBody, required: true },
    responses: {
      200: { description: 'The policy now.', json: { name: 'ApprovalPolicy', schema: ApprovalPolicyOutput } },
    },
    errors: ['unauthorized', 'forbidden', 'validation_failed', 'invalid_json', 'not_found'],
  },
];
