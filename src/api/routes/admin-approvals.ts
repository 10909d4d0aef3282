/**
 * The admin API of consent, `/admin/approvals`, behind the operator's basic auth as the operator
 * view (admin-operations.ts), with the same rule for changes: they must come from this server's
 * origin (a script sends `Origin`), and read-only mode refuses them.
 *
 * - `GET /admin/approvals[?organization=<name>]`: operations awaiting approval, oldest first.
 * - `POST /admin/approvals/:operationId/approve|reject`: a person's decision, recorded with the
 *   operator's name in the audit trail (`approved`, `rejected`); a rejection cancels. JSON for a
 *   script; the operator view's buttons (a form) go back to the operation's page.
 * - `GET|PUT /admin/approvals/policy/:organization` `{approve_above: n | null}`: background
 *   operations of more than n items wait for approval; null, none wait.
 */
import { Router } from 'express';
import { z } from 'zod';
import { AppError } from '../../domain/errors.ts';
import { OPERATION_STATUS } from '../../domain/operation.ts';
import { OperationCounts } from '../../domain/operation-output.ts';
import { parseOrThrow } from '../../domain/validation.ts';
import {
  type Database,
  getApprovalPolicy,
  getOperatorOperation,
  listAwaitingApproval,
  setApprovalPolicy,
} from '../../store/index.ts';
import type { ToolRegistry } from '../../tools/registry.ts';
import { assertOperatorMayChange } from '../operator-guard.ts';
import { OPERATIONS_PAGE_PATH } from '../operator-view/html.ts';

export const ADMIN_APPROVALS_PATH = '/admin/approvals';
/** The most operations one list answers. */
const LIST_LIMIT = 500;
/** The largest threshold: items of one operation are counted in a Postgres integer. */
const MAX_THRESHOLD = 2_147_483_647;

const OrganizationName = z.string().min(1).max(200, { error: 'must be an organization name (at most 200 characters)' });
export const DecisionParams = z.object({
  operationId: z.uuid({ error: 'must be an operation id' }),
  decision: z.enum(['approve', 'reject'], { error: 'must be approve or reject' }),
});
export const ListQuery = z.object({ organization: OrganizationName.optional() });
export const PolicyParams = z.object({ organization: OrganizationName });
export const PolicyBody = z.object({
  approve_above: z
    .number({ error: 'must be a whole number of items, or null for no approval' })
    .int()
    .min(0)
    .max(MAX_THRESHOLD)
    .nullable(),
});

export const ApprovalPolicyOutput = z.object({
  organization_id: z.uuid(),
  organization: z.string(),
  approve_above: z.number().int().nullable().describe('More items than this wait for approval; null: none wait.'),
});
export const ApprovalList = z.object({
  operations: z.array(
    z.object({
      operation_id: z.uuid(),
      organization: z.string(),
      conversation_id: z.uuid(),
      operation_type: z.string(),
      total_items: z.number().int(),
      created_at: z.iso.datetime(),
    }),
  ),
});
export const DecidedOutput = z.object({
  operation_id: z.uuid(),
  status: z.enum(OPERATION_STATUS),
  operation_type: z.string(),
  ...OperationCounts,
});

function noOrganization(name: string): AppError {
  return new AppError('not_found', `There is no organization named "${name}". \`opspad keys list\` names them.`, {
    organization: name,
  });
}

export function adminApprovalsRouter(deps: {
  db: Database;
  tools: ToolRegistry;
  adminUser: string;
  readOnly: boolean;
}): Router {
  const router = Router();
  const actor = `operator:${deps.adminUser}`;

  router.get('/', async (req, res) => {
    const { organization } = parseOrThrow(ListQuery, req.query, 'query');
    const rows = await listAwaitingApproval(deps.db, { organizationName: organization, limit: LIST_LIMIT });
    res.json({
      operations: rows.map((row) => ({
        operation_id: row.id,
        organization: row.organization_name,
        conversation_id: row.conversation_id,
        operation_type: row.operation_type,
        total_items: row.total_items,
        created_at: row.created_at.toISOString(),
      })),
    });
  });

  router.get('/policy/:organization', async (req, res) => {
    const { organization } = parseOrThrow(PolicyParams, req.params, 'path');
    const policy = await getApprovalPolicy(deps.db, organization);
    if (!policy) {
      throw noOrganization(organization);
    }
    res.json(policy);
  });

  router.put('/policy/:organization', async (req, res) => {
    assertOperatorMayChange(req, deps);
    const { organization } = parseOrThrow(PolicyParams, req.params, 'path');
    const { approve_above: approveAbove } = parseOrThrow(PolicyBody, req.body ?? {}, 'body');
    const policy = await setApprovalPolicy(deps.db, organization, approveAbove);
    if (!policy) {
      throw noOrganization(organization);
    }
    res.json(policy);
  });

  router.post('/:operationId/:decision', async (req, res) => {
    assertOperatorMayChange(req, deps);
    const { operationId, decision } = parseOrThrow(DecisionParams, req.params, 'path');
    const where = await getOperatorOperation(deps.db, operationId);
    if (!where) {
      throw new AppError('not_found', `Operation ${operationId} was not found.`, { operation_id: operationId });
    }
    const decided = await deps.tools.decideApproval(
      { organizationId: where.organization_id, conversationId: where.conversation_id },
      operationId,
      decision,
      actor,
    );
    if (req.is('application/x-www-form-urlencoded')) {
      res.redirect(303, `${OPERATIONS_PAGE_PATH}/${operationId}`);
      return;
    }
    res.json(decided);
  });
  return router;
}
