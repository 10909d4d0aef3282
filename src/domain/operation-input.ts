/**
 * Input of the `manage_assistant_operation` tool: one zod schema per action, joined as a
 * discriminated union on `action`. These schemas are the single source for validation and for
 * the JSON Schema handed to models (see tools/definitions.ts).
 *
 * Optional fields accept `null` as "not given": function-calling models in strict mode send
 * null for every field they leave out. Defaults are applied by the executor, and published in
 * the JSON Schema through `.meta({ default })`.
 */
import { z } from 'zod';
import { nameLike } from './names.ts';
import { checkJsonBytes, checkNoteBytes, type SizeLimits, tooLarge } from './size-limits.ts';
import { MAX_INT4 } from './validation.ts';

export const OPERATION_DEFAULTS = {
  batchSize: 5,
  leaseSeconds: 300,
  failuresPageSize: 50,
  maxParallelBatches: 4,
} as const;

export const MAX_ITEM_ID_LENGTH = 512;
export const MAX_BATCH_SIZE = 10_000;
export const MAX_PARALLEL_BATCHES = 64;

/** A value that is absent or null: what a missing required field looks like, strict callers included. */
const isMissing = (input: unknown) => input === undefined || input === null;

/**
 * The operation id an action requires: missing says "missing" and names the action; anything
 * else that is not a UUID says what an operation id is.
 */
function requiredOperationId(action: string) {
  return z.uuid({
    error: (issue) =>
      isMissing(issue.input)
        ? `missing: ${action} needs the operation's id (returned by create, shown in the context)`
        : 'must be an operation id (a UUID) returned by create',
  });
}

/** An operation id that may be omitted: then the conversation's active operation is used. */
function optionalOperationId(action: string) {
  return z
    .uuid({ error: 'must be an operation id (a UUID) returned by create' })
    .nullish()
    .describe(`Omit to ${action} the conversation's active operation.`);
}

/** The type error of a field an action cannot do without: "missing" naming the action, or `otherwise`. */
function missingOr(action: string, field: string, what: string, otherwise: string) {
  return (issue: { input?: unknown }) =>
    isMissing(issue.input) ? `missing: ${action} needs ${field} (${what})` : otherwise;
}

/** One item id: what create's `item_ids` holds (and update's ids), checked element by element when streamed. */
export const ItemIdInput = z
  .string({ error: 'must be a string' })
  .min(1, 'must not be empty')
  .max(MAX_ITEM_ID_LENGTH, `must be at most ${MAX_ITEM_ID_LENGTH} characters`);
const itemId = ItemIdInput;

const leaseOwner = nameLike(z.string().min(1).max(200))
  .nullish()
  .describe(
    'Who is working on the batch. Leave empty when the assistant itself processes items; workers pass their own id.',
  );

export const CreateInput = z.strictObject({
  action: z.literal('create'),
  operation_type: nameLike(
    z
      .string({ error: missingOr('create', 'operation_type', 'a short label for the work', 'must be a string') })
      .min(1, 'must not be empty')
      .max(64, 'must be at most 64 characters'),
  ).describe('A short label for the work, e.g. "send_sms" or "update_contacts".'),
  total_items: z
    .number({ error: missingOr('create', 'total_items', 'the number of item ids', 'must be a number') })
    .int()
    .min(1)
    .describe('How many items the operation holds; must equal the length of item_ids.'),
  item_ids: z
    .array(itemId, { error: missingOr('create', 'item_ids', 'every item id to process', 'must be an array of ids') })
    .min(1, 'must hold at least one id')
    .describe('Every item id to process, each unique, in processing order.'),
  batch_size: z
    .number()
    .int()
    .min(1)
    .max(MAX_BATCH_SIZE)
    .nullish()
    .meta({ default: OPERATION_DEFAULTS.batchSize })
    .describe('Items per batch returned by progress.'),
  query_params: z
    .record(z.string(), z.unknown())
    .nullish()
    .describe('The filter that produced the ids, kept so the work can be explained or redone.'),
  notes: z.string().max(2000).nullish().describe('Free-form notes shown with the operation.'),
  execution: z
    .enum(['assistant', 'background'])
    .nullish()
    .describe(
      '"assistant": you process each batch yourself via progress/update. "background": workers do it (the default when a worker handles operation_type).',
    ),
  max_parallel_batches: z
    .number()
    .int()
    .min(1)
    .max(MAX_PARALLEL_BATCHES)
    .nullish()
    .meta({ default: OPERATION_DEFAULTS.maxParallelBatches })
    .describe('Background only: how many batches of this operation workers may run at once.'),
  max_failure_rate: z
    .number()
    .gt(0)
    .max(1)
    .nullish()
    .describe(
      'Pause the operation when more than this share of its last 50 items failed (e.g. 0.2), instead of failing every item. Omit to never pause for failures.',
    ),
});

export const ProgressInput = z.strictObject({
  action: z.literal('progress'),
  operation_id: optionalOperationId('progress'),
  lease_owner: leaseOwner,
  lease_seconds: z
    .number()
    .int()
    .min(1)
    .max(86_400)
    .nullish()
    .meta({ default: OPERATION_DEFAULTS.leaseSeconds })
    .describe('How long the batch stays reserved for you before it is handed out again.'),
});

export const UpdateInput = z.strictObject({
  action: z.literal('update'),
  operation_id: requiredOperationId('update'),
  completed_ids: z.array(itemId).max(MAX_BATCH_SIZE).nullish().describe('Ids processed successfully.'),
  failed: z
    .array(
      z.strictObject({
        id: itemId,
        reason: z.string().min(1, 'must say why the item failed').max(2000),
      }),
    )
    .max(MAX_BATCH_SIZE)
    .nullish()
    .describe('Ids that failed, each with the reason.'),
  lease_owner: leaseOwner,
});

export const CompleteInput = z.strictObject({
  action: z.literal('complete'),
  operation_id: requiredOperationId('complete'),
  force: z
    .boolean()
    .nullish()
    .meta({ default: false })
    .describe('Complete even though items remain; they are recorded as abandoned.'),
});

export const ResumeInput = z.strictObject({
  action: z.literal('resume'),
  operation_id: requiredOperationId('resume'),
});

export const PauseInput = z.strictObject({
  action: z.literal('pause'),
  operation_id: optionalOperationId('pause'),
});

export const CancelInput = z.strictObject({
  action: z.literal('cancel'),
  operation_id: requiredOperationId('cancel'),
});

export const GetInput = z.strictObject({
  action: z.literal('get'),
  operation_id: optionalOperationId('get'),
  failures_cursor: z
    .string()
    .regex(/^\d{1,10}$/, 'must be the next_failures_cursor returned by a previous get')
    // Ten digits may still be past the largest ordinal (a Postgres integer): refuse, not overflow.
    .refine((cursor) => Number(cursor) <= MAX_INT4, 'must be the next_failures_cursor returned by a previous get')
    .nullish()
    .describe('Continue the list of failures where the previous get stopped.'),
  failures_limit: z.number().int().min(1).max(500).nullish().meta({ default: OPERATION_DEFAULTS.failuresPageSize }),
});

export const RetryFailedInput = z.strictObject({
  action: z.literal('retry_failed'),
  operation_id: requiredOperationId('retry_failed'),
  batch_size: z
    .number()
    .int()
    .min(1)
    .max(MAX_BATCH_SIZE)
    .nullish()
    .describe('Items per batch of the new operation; omitted: the original operation’s.'),
});

export const OPERATION_ACTIONS = [
  'create',
  'progress',
  'update',
  'complete',
  'resume',
  'pause',
  'cancel',
  'get',
  'retry_failed',
] as const;

export const OperationToolInput = z.discriminatedUnion(
  'action',
  [
    CreateInput,
    ProgressInput,
    UpdateInput,
    CompleteInput,
    ResumeInput,
    PauseInput,
    CancelInput,
    GetInput,
    RetryFailedInput,
  ],
  {
    error: (issue) => {
      if (issue.code !== 'invalid_union') {
        return undefined;
      }
      const given = (issue.input as { action?: unknown } | null | undefined)?.action;
      return `${isMissing(given) ? 'missing: say what to do, ' : ''}must be one of: ${OPERATION_ACTIONS.join(', ')}`;
    },
  },
);

export type OperationToolInput = z.infer<typeof OperationToolInput>;
export type CreateInput = z.infer<typeof CreateInput>;
export type ProgressInput = z.infer<typeof ProgressInput>;
export type UpdateInput = z.infer<typeof UpdateInput>;
export type CompleteInput = z.infer<typeof CompleteInput>;
export type GetInput = z.infer<typeof GetInput>;
export type RetryFailedInput = z.infer<typeof RetryFailedInput>;

/**
 * The size limits of a create (docs/limits.md): each item id, query_params as stored
 * JSON, the notes. The schema's fixed ceilings apply first; these are the deployment's own.
 */
export function checkCreateSizes(
  input: Omit<CreateInput, 'item_ids'> & { item_ids?: readonly string[] },
  limits: SizeLimits,
  /** The first id over limits.itemIdLength when the ids were checked as they streamed in. */
  firstLongId?: { index: number; length: number } | null,
): void {
  let long = firstLongId ?? null;
  if (limits.itemIdLength < MAX_ITEM_ID_LENGTH && input.item_ids) {
    const index = input.item_ids.findIndex((id) => id.length > limits.itemIdLength);
    const id = input.item_ids[index];
    long = id === undefined ? null : { index, length: id.length };
  }
  if (long) {
    throw tooLarge(
      'itemIdLength',
      `item_ids[${long.index}]`,
      { actual: long.length, max: limits.itemIdLength },
      'Use a shorter key for the item (e.g. its database id) and keep the rest where the handler can look it up.',
    );
  }
  checkJsonBytes(
    'queryParamsBytes',
    'query_params',
    input.query_params,
    limits.queryParamsBytes,
    'Keep the filter that produced the ids, not the data: handlers look items up by id.',
  );
  checkNoteBytes('notes', input.notes, limits.noteBytes);
}
