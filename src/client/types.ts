/**
 * The types of `opspad/client`'s calls, taken from the zod schemas the server validates and
 * answers with (`z.input` for what is sent, `z.output` for what comes back), so the client and
 * the server cannot disagree. Type-only: nothing here exists at run time.
 *
 * The page queries are written out (their schemas sit in the express routes, which the client
 * must not reach even as types); test/integration/client.test.ts checks they equal the routes'.
 */
import type { z } from 'zod';
import type {
  ContextFragment,
  ContextRendersPage,
  ExecutionEnded,
  ExecutionStarted,
  GetScratchpadResult,
  Liveness,
  PadSettingsResult,
  PadVersionsPage,
  PutScratchpadResult,
  Readiness,
  ReadNotesResult,
  ReorganizeResult,
  ScratchpadEventsPage,
  ToolList,
  TracesPage,
  UpdateScratchpadResult,
  WriteNotesResult,
} from '../domain/conversation-output.ts';
import type { ReadFromScratchpadInput, WriteToScratchpadInput } from '../domain/notes-input.ts';

export type { ItemResult, ResultFormat } from '../domain/item-results.ts';

import type { OperationToolInput } from '../domain/operation-input.ts';
import type { OPERATION_RESULTS, OperationToolResult } from '../domain/operation-output.ts';
import type {
  PadSettingsInput as PadSettingsSchema,
  PutScratchpadBody,
  ReorganizeBody,
  UpdateScratchpadInput as UpdateScratchpadSchema,
} from '../domain/scratchpad-input.ts';

export type {
  CancelResult,
  CompleteResult,
  ConversationOperationsPage,
  CreateResult,
  GetResult,
  OperationAuditEvent,
  OperationProgress,
  PauseResult,
  ProgressResult,
  ResumeResult,
  RetryFailedResult,
  UpdateResult,
} from '../domain/operation-output.ts';
export type {
  ContextFragment,
  ContextRendersPage,
  ExecutionEnded,
  ExecutionStarted,
  GetScratchpadResult,
  Liveness,
  PadSettingsResult,
  PadVersionsPage,
  PutScratchpadResult,
  Readiness,
  ReadNotesResult,
  ReorganizeResult,
  ScratchpadEventsPage,
  ToolList,
  TracesPage,
  UpdateScratchpadResult,
  WriteNotesResult,
};

export type OperationAction = z.input<typeof OperationToolInput>['action'];

/** The input of one action of `manage_assistant_operation`, without `action`. */
export type OperationInput<A extends OperationAction> = Omit<
  Extract<z.input<typeof OperationToolInput>, { action: A }>,
  'action'
>;

/** The answer of one action. */
export type OperationResult<A extends OperationAction> = z.output<(typeof OPERATION_RESULTS)[A]>;

export type WriteNotesInput = z.input<typeof WriteToScratchpadInput>;
export type ReadNotesInput = z.input<typeof ReadFromScratchpadInput>;
export type UpdateScratchpadInput = z.input<typeof UpdateScratchpadSchema>;
export type PutScratchpadInput = z.input<typeof PutScratchpadBody>;
export type PadSettingsInput = z.input<typeof PadSettingsSchema>;
export type ReorganizeInput = z.input<typeof ReorganizeBody>;

/** `?before&limit` of scratchpad versions (newest first). */
export interface VersionsQuery {
  before?: number | undefined;
  limit?: number | undefined;
}

/** `?after&limit` of scratchpad events. */
export interface EventsPageQuery {
  after?: number | undefined;
  limit?: number | undefined;
}

/** `?after&limit` of execution traces. */
export interface TracesQuery {
  after?: number | undefined;
  limit?: number | undefined;
}

export type ToolFormat = 'opspad' | 'openai' | 'anthropic';

/** What each tool answers, by name (a tool call's input is whatever the model produced). */
export interface ToolResults {
  manage_assistant_operation: z.output<typeof OperationToolResult>;
  write_to_scratchpad: WriteNotesResult;
  read_from_scratchpad: ReadNotesResult;
  update_scratchpad: UpdateScratchpadResult;
}
export type ToolName = keyof ToolResults;
