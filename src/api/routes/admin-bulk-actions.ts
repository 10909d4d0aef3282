/**
 * `/admin/bulk-actions`: pause, resume, cancel or retry the failed items of every operation a
 * filter matches (an organization, a type, a status, a creation window). A preview says how many
 * match; the action then fixes that set, answers 202 with its id, and runs in the background
 * (tools/bulk-action-runner.ts), each operation through the operation tool as one operator click
 * would. Its record says who asked, the filter, how many matched, were applied and were skipped.
 *
 * JSON, behind the operator's basic auth; `opspad ops pause|resume|cancel|retry-failed` does the
 * same from a shell. A POST must be `application/json` (a forged cross-site form cannot send it
 * without a CORS preflight nobody answers); read-only mode refuses creating one.
 */
import express, { type RequestHandler, Router } from 'express';
import { z } from 'zod';
import {
  BULK_ACTION_STATUS,
  BULK_ACTIONS,
  type BulkActionName,
  BulkFilter,
  skipBeforeApplying,
} from '../../domain/bulk-action.ts';
import { AppError } from '../../domain/errors.ts';
import { OPERATION_STATUS, type OperationStatus } from '../../domain/operation.ts';
import { parseOrThrow } from '../../domain/validation.ts';
import {
  type BulkActionRecord,
  type BulkPreview,
  bulkActionTargets,
  createBulkAction,
  type Database,
  getBulkAction,
  listBulkActions,
  previewBulkAction,
} from '../../store/index.ts';
import type { BulkActionRunner } from '../../tools/bulk-action-runner.ts';

export const ADMIN_BULK_ACTIONS_PATH = '/admin/bulk-actions';
/** Skipped operations a bulk action's record lists (with why). */
export const SKIPPED_LISTED = 100;

const action = z.enum(BULK_ACTIONS, { error: `must be one of ${BULK_ACTIONS.join(', ')}` });
export const PreviewBody = z.strictObject({ action, filter: BulkFilter });
export const CreateBody = PreviewBody.extend({
  expected_matched: z
    .number({ error: 'must be the number of operations the preview matched' })
    .int()
    .min(0)
    .optional()
    .describe('The preview’s count: when the filter matches another number now, the action is refused (409).'),
});
export const BulkActionParams = z.object({ id: z.uuid({ error: 'must be a bulk action id' }) });
export const ListQuery = z.object({
  limit: z.coerce.number({ error: 'must be a number' }).int().min(1).max(100, 'must be at most 100').default(20),
});

const count = z.number().int().min(0);
export const BulkActionPreview = z.object({
  action,
  filter: BulkFilter,
  matched: count.describe('Operations the filter matches now.'),
  by_status: z.partialRecord(z.enum(OPERATION_STATUS), count).describe('How many of them are in each status.'),
  applicable: count
    .nullable()
    .describe(
      'How many the action would change now (the rest are skipped); null for retry_failed, which depends on failures.',
    ),
  max_operations: count.describe('OPSPAD_MAX_BULK_OPERATIONS: the most one action takes.'),
  sample: z
    .array(
      z.object({
        operation_id: z.uuid(),
        organization: z.string(),
        operation_type: z.string(),
        status: z.string(),
        created_at: z.string(),
      }),
    )
    .describe('The newest few that match.'),
});

export const BulkAction = z.object({
  id: z.uuid(),
  action,
  filter: BulkFilter,
  actor: z.string().describe('Who asked (operator:<user>).'),
  status: z.enum(BULK_ACTION_STATUS),
  matched: count.describe('Operations fixed at its creation.'),
  applied: count,
  skipped: count,
  pending: count,
  created_at: z.string(),
  finished_at: z.string().nullable(),
  url: z.string().describe('Where to follow it.'),
});
export const BulkActionDetail = BulkAction.extend({
  skipped_operations: z
    .array(z.object({ operation_id: z.uuid(), reason: z.string().nullable() }))
    .describe(`The first ${SKIPPED_LISTED} skipped, with why.`),
});
export const BulkActionList = z.object({ bulk_actions: z.array(BulkAction) });

export interface AdminBulkActionsDeps {
  db: Database;
  runner: BulkActionRunner;
  adminUser: string;
  readOnly: boolean;
  /** OPSPAD_MAX_BULK_OPERATIONS */
  maxOperations: number;
}

/** How many of the matched operations `name` would change now; null when their status does not say. */
export function applicableOf(name: BulkActionName, byStatus: BulkPreview['by_status']): number | null {
  if (name === 'retry_failed') {
    return null;
  }
  return Object.entries(byStatus)
    .filter(([status]) => skipBeforeApplying(name, status as OperationStatus) === null)
    .reduce((sum, [, n]) => sum + (n ?? 0), 0);
}

/** Refuses a body that is not `application/json`, before reading it. */
const requireJson: RequestHandler = (req, _res, next) => {
  if (!req.is('application/json')) {
    throw new AppError('validation_failed', 'Invalid input: Content-Type: send the bulk action as application/json.', {
      issues: [{ field: 'Content-Type', message: 'must be application/json' }],
      total_issues: 1,
    });
  }
  next();
};

/** Refuses any change in read-only mode. */
function refuseReadOnly(readOnly: boolean): RequestHandler {
  return (_req, _res, next) => {
    if (readOnly) {
      throw new AppError('forbidden', 'The operator surfaces are read-only (OPSPAD_ADMIN_READONLY=true).', {
        read_only: true,
      });
    }
    next();
  };
}

export function bulkActionJson(record: BulkActionRecord) {
  return {
    ...record,
    created_at: record.created_at.toISOString(),
    finished_at: record.finished_at?.toISOString() ?? null,
    url: `${ADMIN_BULK_ACTIONS_PATH}/${record.id}`,
  };
}

export async function bulkActionOr404(db: Database, id: string) {
  const record = await getBulkAction(db, id);
  if (!record) {
    throw new AppError('not_found', `Bulk action ${id} was not found.`, { bulk_action_id: id });
  }
  return record;
}

export function adminBulkActionsRouter(deps: AdminBulkActionsDeps): Router {
  const router = Router();
  const json = express.json({ limit: '4kb', strict: true, type: () => true });

  router.get('/', async (req, res) => {
    const { limit } = parseOrThrow(ListQuery, req.query, 'query');
    res.json({ bulk_actions: (await listBulkActions(deps.db, limit)).map(bulkActionJson) });
  });

  router.post('/preview', requireJson, json, async (req, res) => {
    const body = parseOrThrow(PreviewBody, req.body ?? {}, 'body');
    const preview = await previewBulkAction(deps.db, body.filter);
    res.json({
      action: body.action,
      filter: body.filter,
      ...preview,
      applicable: applicableOf(body.action, preview.by_status),
      max_operations: deps.maxOperations,
    });
  });

  router.post('/', refuseReadOnly(deps.readOnly), requireJson, json, async (req, res) => {
    const body = parseOrThrow(CreateBody, req.body ?? {}, 'body');
    const record = await createBulkAction(deps.db, {
      action: body.action,
      filter: body.filter,
      actor: `operator:${deps.adminUser}`,
      maxOperations: deps.maxOperations,
      expectedMatched: body.expected_matched,
    });
    if (record.status === 'running') {
      deps.runner.run(record.id);
    }
    const out = bulkActionJson(record);
    res.status(202).location(out.url).json(out);
  });

  router.get('/:id', async (req, res) => {
    const { id } = parseOrThrow(BulkActionParams, req.params, 'path');
    const record = await bulkActionOr404(deps.db, id);
    const skipped = await bulkActionTargets(deps.db, id, 'skipped', { limit: SKIPPED_LISTED });
    res.json({
      ...bulkActionJson(record),
      skipped_operations: skipped.map((t) => ({ operation_id: t.operation_id, reason: t.detail })),
    });
  });

  return router;
}
