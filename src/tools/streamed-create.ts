/**
 * `manage_assistant_operation` for a body whose `item_ids` streams in (api/operation-body.ts):
 * the answer is the one the whole body would get — same checks, same order, same messages and
 * field paths — but the ids are checked and copied into the database as they arrive, and never
 * held as one array.
 *
 * The order of the checks is the order a whole body meets them: the body itself (size,
 * encoding, UTF-8, JSON), values that cannot be stored, fields of other actions, the schema
 * (item_ids' element issues in their place among the other fields'), then the create's own
 * checks (prepareCreate) and last the database's (the unique index finds repeated ids). The
 * ids reach the database only while every id so far is valid; the operation row is written
 * only after the whole body passed, and anything refused rolls the transaction back.
 *
 * On PGlite (no COPY FROM STDIN) the ids are collected and the body goes the ordinary way.
 */
import { z } from 'zod';
import { AppError } from '../domain/errors.ts';
import { ItemIdTally } from '../domain/item-id-tally.ts';
import { CreateInput, OperationToolInput } from '../domain/operation-input.ts';
import { DEFAULT_SIZE_LIMITS } from '../domain/size-limits.ts';
import { findUnstorableValue, unstorableValueError, validationError } from '../domain/validation.ts';
import { createOperationFromStream, RepeatedItemIdError } from '../store/index.ts';
import { normalizeFlatInput } from './flat-input.ts';
import {
  createdResponse,
  executeOperationTool,
  OPERATION_TOOL_NAME,
  type OperationToolDeps,
  prepareCreate,
  repeatedIdsError,
  type ToolCallContext,
  type ToolResult,
} from './operation-tool.ts';

/** A top-level field of the body other than the streamed item_ids, parsed. */
export interface StreamedField {
  key: string;
  value: unknown;
}

/** What is known once the body has been read to its end. */
export interface StreamedBodyEnd {
  /** The other top-level fields, in body order. */
  fields: readonly StreamedField[];
  /** Where item_ids stood among them (the index of the field it preceded). */
  idsPosition: number;
  /** A second `item_ids` key: the body is ambiguous. */
  repeatedIds: boolean;
}

/** A tool body whose top-level `item_ids` array is read as it arrives. */
export interface StreamedToolBody {
  /** The elements of item_ids, in order, a chunk at a time (strings, or other JSON values). */
  ids(): AsyncIterable<readonly unknown[]>;
  /** Reads the rest of the body; rejects with the body's own error (size, encoding, JSON). */
  finish(): Promise<StreamedBodyEnd>;
  /** Stops reading (the answer is decided) and frees what the reading holds; safe to call twice. */
  close(): void;
}

const WHAT = `${OPERATION_TOOL_NAME} input`;
/** item_ids as the schema sees it while its elements are checked one by one: a valid array. */
const STAND_IN: readonly string[] = ['id'];
const CREATE_FIELDS = Object.keys(CreateInput.shape);

/** Sets `key` as JSON.parse would: an own property, even "__proto__"; a repeated key keeps its place. */
function define(target: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(target, key, { value, writable: true, enumerable: true, configurable: true });
}

/** The top-level object of the body, item_ids standing in its place as `ids`. */
function assemble(end: StreamedBodyEnd, ids: unknown): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  end.fields.forEach((field, index) => {
    if (index === end.idsPosition) {
      define(body, 'item_ids', ids);
    }
    define(body, field.key, field.value);
  });
  if (end.idsPosition >= end.fields.length) {
    define(body, 'item_ids', ids);
  }
  return body;
}

function pick(body: Record<string, unknown>, keys: readonly string[]): Record<string, unknown> {
  const picked: Record<string, unknown> = {};
  for (const key of keys) {
    define(picked, key, body[key]);
  }
  return picked;
}

/** The body's checks, in the order a whole body meets them; the store's parameters when it passes. */
function checkStreamedCreate(deps: OperationToolDeps, ctx: ToolCallContext, end: StreamedBodyEnd, tally: ItemIdTally) {
  if (end.repeatedIds || end.fields.some((field) => field.key === 'item_ids')) {
    throw new AppError(
      'validation_failed',
      'Invalid input: item_ids: appears more than once in the body; send it once.',
      { issues: [{ field: 'item_ids', message: 'appears more than once in the body' }], total_issues: 1 },
    );
  }
  const body = assemble(end, STAND_IN);
  // Values the database cannot hold, first in the order of the body's keys (as a whole body is
  // walked): the fields before item_ids, its elements, the fields after it.
  const keys = Object.keys(body);
  const at = keys.indexOf('item_ids');
  const unstorable =
    findUnstorableValue(pick(body, keys.slice(0, at))) ??
    tally.firstUnstorable ??
    findUnstorableValue(pick(body, keys.slice(at + 1)));
  if (unstorable) {
    throw unstorableValueError(unstorable);
  }
  const input = normalizeFlatInput(body) as Record<string, unknown>;
  const parsed = OperationToolInput.safeParse(input);
  if (input.action === 'create' && (!parsed.success || tally.issueCount > 0)) {
    // The schema's issues with item_ids' element issues in the place the schema would list them.
    const idsAt = CREATE_FIELDS.indexOf('item_ids');
    const rank = (path: readonly PropertyKey[]) =>
      path.length === 0 ? CREATE_FIELDS.length : CREATE_FIELDS.indexOf(String(path[0]));
    const schemaIssues = parsed.success ? [] : parsed.error.issues;
    const elementIssues = tally.issues.map(({ index, message }) => ({
      code: 'custom' as const,
      path: ['item_ids', index],
      message,
      input: undefined,
    }));
    const merged = [
      ...schemaIssues.filter((issue) => rank(issue.path) < idsAt),
      ...elementIssues,
      ...schemaIssues.filter((issue) => rank(issue.path) > idsAt),
    ];
    throw validationError(new z.ZodError(merged), WHAT, schemaIssues.length + tally.issueCount);
  }
  if (!parsed.success) {
    throw validationError(parsed.error, WHAT);
  }
  if (parsed.data.action !== 'create') {
    // normalizeFlatInput refuses item_ids for every other action; this cannot happen.
    throw new AppError('validation_failed', `Invalid input: item_ids: is not a field of ${parsed.data.action}.`, {
      issues: [{ field: 'item_ids', message: `is not a field of ${parsed.data.action}` }],
    });
  }
  return prepareCreate(deps, ctx, parsed.data, { count: tally.count, firstLong: tally.firstLong });
}

/** Runs the operation tool on a body whose item_ids streams in. */
export async function executeStreamedOperationTool(
  deps: OperationToolDeps,
  ctx: ToolCallContext,
  body: StreamedToolBody,
): Promise<ToolResult> {
  if (deps.db.engine !== 'postgres') {
    const ids: unknown[] = [];
    for await (const chunk of body.ids()) {
      for (const id of chunk) {
        ids.push(id);
      }
    }
    const whole = assemble(await body.finish(), ids);
    const unstorable = findUnstorableValue(whole);
    if (unstorable) {
      throw unstorableValueError(unstorable);
    }
    return executeOperationTool(deps, ctx, normalizeFlatInput(whole));
  }
  const tally = new ItemIdTally((deps.sizeLimits ?? DEFAULT_SIZE_LIMITS).itemIdLength);
  const created = await createOperationFromStream(deps.db, ctx.scope, async (sink) => {
    for await (const chunk of body.ids()) {
      const valid = tally.check(chunk);
      // Past the first bad id, or past OPSPAD_MAX_ITEMS, the ids are only checked: the create
      // will be refused, and the rest of the body still decides which error it gets.
      if (valid && tally.count <= deps.maxItems) {
        await sink.write(valid);
      }
    }
    return checkStreamedCreate(deps, ctx, await body.finish(), tally);
  }).catch((error: unknown) => {
    throw error instanceof RepeatedItemIdError ? repeatedIdsError(error.itemIds) : error;
  });
  await deps.onActivated?.(created.operation);
  return createdResponse(created.operation, created.pausedOperationId);
}
