/**
 * What the conversation surfaces answer — the notes and structured scratchpads, the context
 * fragment, executions and their traces, tool definitions — plus health and the error body every
 * refusal has. Like operation-output.ts: the single description the OpenAPI document and
 * `opspad/client` are generated from.
 */
import { z } from 'zod';
import { ERROR_CODES, type ErrorCode } from './errors.ts';
import {
  ExecutionMode,
  OperationCounts,
  OperationStatus,
  PausedByOutput,
  ThrottledOutput,
} from './operation-output.ts';
import { PadFact, PadItem, PadRef, SCRATCHPAD_SCHEMA } from './scratchpad.ts';

const count = z.number().int().min(0);
const timestamp = z.iso.datetime();

export const ErrorBody = z
  .object({
    error: z.object({
      code: z.enum(Object.keys(ERROR_CODES) as [ErrorCode, ...ErrorCode[]]).describe('Stable: branch on it.'),
      message: z.string().describe('What was wrong and what to do, in words a person or a model can act on.'),
      details: z
        .record(z.string(), z.unknown())
        .describe('Structured facts: the field at fault (`field`, or `issues: [{field, message}]`), limits, ids.'),
    }),
  })
  .describe('Every refusal and failure: 4xx for the caller to fix, 5xx for opspad.');

// ─── Notes scratchpad tools ─────────────────────────────────────────────────────────────────

const notesScope = {
  scope: z.enum(['conversation', 'execution']).describe('Where the notes live: the execution of the header, if any.'),
  execution_id: z.uuid().nullable(),
};

export const WriteNotesResult = z.object({
  result: z.string().describe('The text a model reads: the note written, or every note with return_history.'),
  ...notesScope,
  note_count: count.optional().describe('With return_history: how many notes the scratchpad holds.'),
  next_after: count
    .nullable()
    .optional()
    .describe('With return_history: the `after` of the next page of notes; null when the answer holds them all.'),
});

export const ReadNotesResult = z.object({
  result: z.string().describe('A page of the visible notes, persistent ones first; "Scratchpad is empty." when none.'),
  ...notesScope,
  note_count: count.describe('How many notes are visible in all, over every page.'),
  next_after: count.nullable().describe('Send as `after` to read the next page; null on the last page.'),
  persistent_note_added: z.boolean(),
});

// ─── Structured scratchpad ──────────────────────────────────────────────────────────────────

export const PadCounts = z.object({ goals: count, open_items: count, facts: count, refs: count });

export const Scratchpad = z.object({
  version: count.describe('Pass as expected_version to write based on this read.'),
  schema: z.literal(SCRATCHPAD_SCHEMA),
  goals: z.array(PadItem),
  open_items: z.array(PadItem),
  facts: z.array(PadFact),
  refs: z.array(PadRef),
});

export const PadSettings = z.object({
  reorganize_every: count.describe('Reorganize after this many writes; 0 turns the cadence off.'),
  schema_retries: count,
  max_recent_messages: count,
});

export const UpdateScratchpadResult = z.object({
  version: count,
  counts: PadCounts,
  reorganization_queued: z.boolean(),
});

export const GetScratchpadResult = z.object({ scratchpad: Scratchpad, settings: PadSettings });

export const PutScratchpadResult = z.object({ scratchpad: Scratchpad, reorganization_queued: z.boolean() });

export const PadVersionsPage = z.object({
  versions: z.array(
    z.object({
      version: count,
      source: z.string(),
      reason: z.string(),
      metadata: z.record(z.string(), z.unknown()),
      created_at: timestamp,
      counts: PadCounts,
    }),
  ),
  next_before: z.number().int().nullable().describe('Pass as before for the next (older) page; null at the end.'),
});

export const SCRATCHPAD_EVENT_STATUSES = [
  'reorganized',
  'invalid_sources',
  'llm_error',
  'store_error',
  'superseded',
  'missing_scratchpad',
] as const;

export const ScratchpadEventsPage = z.object({
  events: z.array(
    z.object({
      id: z.number().int(),
      kind: z.string(),
      status: z.enum(SCRATCHPAD_EVENT_STATUSES),
      data: z.record(z.string(), z.unknown()),
      created_at: timestamp,
    }),
  ),
});

export const PadSettingsResult = z.object({ settings: PadSettings });

export const ReorganizeResult = z.object({
  status: z.enum(SCRATCHPAD_EVENT_STATUSES),
  version: count.optional(),
  before_counts: PadCounts.optional(),
  after_counts: PadCounts.optional(),
  errors: z.array(z.string()).optional(),
  error: z.string().optional(),
});

export const ContextRendersPage = z.object({
  renders: z.array(
    z.object({
      id: z.number().int(),
      pad_version: count,
      chars: count,
      sha256: z.string(),
      created_at: timestamp,
    }),
  ),
});

// ─── Context fragment ───────────────────────────────────────────────────────────────────────

const ContextOperation = z.object({
  operation_id: z.uuid(),
  alias: z.string().nullable().describe('How the text names it (#1), also in the facts that cite it.'),
  operation_type: z.string(),
  status: OperationStatus,
  execution: ExecutionMode,
  ...OperationCounts,
  paused_reason: z.string().nullable(),
  paused_by: PausedByOutput,
  throttled: ThrottledOutput.optional(),
  conversation_id: z.uuid().optional().describe('Other conversations’ operations only.'),
});

export const ContextFragment = z.object({
  text: z.string().describe('Put it at the end of the system prompt, every turn.'),
  tokens: count.describe('The size of text in o200k tokens, at most OPSPAD_CONTEXT_MAX_TOKENS.'),
  operations: z.array(ContextOperation),
  operations_total: count,
  other_operations: z
    .array(ContextOperation)
    .optional()
    .describe('With other_conversations=true: open operations of the organization’s other conversations.'),
  other_operations_total: count.optional(),
  scratchpad: z.object({ version: count, chars: count, budget: count }),
});

// ─── Executions of the notes scratchpad ─────────────────────────────────────────────────────

const execution = {
  execution_id: z.uuid().describe('Send it as the X-Opspad-Execution header of tool calls.'),
  conversation_id: z.uuid(),
  status: z.enum(['running', 'ended']),
  created_at: timestamp,
};

export const ExecutionStarted = z.object(execution);

export const ExecutionEnded = z.object({
  ...execution,
  ended_at: timestamp.nullable(),
  cleared_notes: count,
});

export const TracesPage = z.object({
  execution_id: z.uuid(),
  traces: z.array(
    z.object({
      seq: z.number().int().min(1),
      kind: z.enum(['read', 'write']),
      notes: z.string().optional(),
      at: timestamp,
    }),
  ),
  next_after: z.number().int().nullable().describe('Pass as after for the next page; null at the end.'),
  traces_pruned_at: timestamp
    .optional()
    .describe('Present once retention deleted this ended execution’s traces (OPSPAD_RETENTION_TRACES after its end).'),
});

// ─── Tool definitions ───────────────────────────────────────────────────────────────────────

const jsonSchema = z.record(z.string(), z.unknown()).describe('A JSON Schema.');

export const ToolList = z.object({
  tools: z.union([
    z.array(z.object({ name: z.string(), description: z.string(), input_schema: jsonSchema })),
    z.array(
      z.object({
        type: z.literal('function'),
        function: z.object({
          name: z.string(),
          description: z.string(),
          parameters: jsonSchema,
          strict: z.boolean(),
        }),
      }),
    ),
    z.array(
      z.object({
        type: z.literal('function'),
        name: z.string(),
        description: z.string(),
        parameters: jsonSchema,
        strict: z.boolean(),
      }),
    ),
  ]),
});

// ─── Health ─────────────────────────────────────────────────────────────────────────────────

export const Liveness = z.object({ status: z.literal('ok') });

export const Readiness = z.object({
  status: z.enum(['ready', 'not_ready']),
  shutting_down: z.boolean(),
  checks: z.record(z.string(), z.string()).describe('"ok", or what failed, per dependency.'),
});

/** `GET /` for an API client: where things are on this server. */
export const ServiceIndex = z.object({
  service: z.literal('opspad'),
  links: z
    .object({
      api: z.string().describe("The HTTP API's base: every route under it takes an organization's API key."),
      docs: z.string().describe('This API as a readable page.'),
      openapi: z.string().describe('The OpenAPI 3.1 document.'),
      health: z.string().describe('Liveness.'),
      readiness: z.string().describe('Readiness: Postgres and the queue backend answer.'),
      operator_view: z.string().describe("Every organization's operations (operator sign-in)."),
      bull_board: z.string().describe('The job queues (operator sign-in).'),
      metrics: z.string().describe('Prometheus metrics (operator sign-in).'),
    })
    .describe('Paths on this server.'),
});

export type ErrorBody = z.output<typeof ErrorBody>;
export type WriteNotesResult = z.output<typeof WriteNotesResult>;
export type ReadNotesResult = z.output<typeof ReadNotesResult>;
export type UpdateScratchpadResult = z.output<typeof UpdateScratchpadResult>;
export type GetScratchpadResult = z.output<typeof GetScratchpadResult>;
export type PutScratchpadResult = z.output<typeof PutScratchpadResult>;
export type PadVersionsPage = z.output<typeof PadVersionsPage>;
export type ScratchpadEventsPage = z.output<typeof ScratchpadEventsPage>;
export type PadSettingsResult = z.output<typeof PadSettingsResult>;
export type ReorganizeResult = z.output<typeof ReorganizeResult>;
export type ContextRendersPage = z.output<typeof ContextRendersPage>;
export type ContextFragment = z.output<typeof ContextFragment>;
export type ExecutionStarted = z.output<typeof ExecutionStarted>;
export type ExecutionEnded = z.output<typeof ExecutionEnded>;
export type TracesPage = z.output<typeof TracesPage>;
export type ToolList = z.output<typeof ToolList>;
export type Liveness = z.output<typeof Liveness>;
export type Readiness = z.output<typeof Readiness>;
export type ServiceIndex = z.output<typeof ServiceIndex>;
