/**
 * `opspad/client`: a typed client of opspad's HTTP API — every route and tool — for Node 20+,
 * Deno, Bun and browsers. It needs nothing but `fetch`: no dependency is loaded at run time.
 * Every refusal is an {@link OpspadError} with opspad's `code`, the HTTP `status` and `details`.
 *
 * @example
 * import { createClient } from 'opspad/client';
 *
 * const opspad = createClient({ baseUrl: 'http://127.0.0.1:3000', apiKey: process.env.OPSPAD_API_KEY! });
 * const conversation = crypto.randomUUID();
 * const op = await opspad.operations.create(conversation, {
 *   operation_type: 'send_sms', total_items: 2, item_ids: ['c1', 'c2'],
 * });
 * for await (const event of opspad.operations.events(op.operation_id)) {
 *   if (event.event === 'progress') console.log(event.data.completed_count, '/', event.data.total_items);
 * }
 */
import type { READ_TOOL_NAME, WRITE_TOOL_NAME } from '../domain/notes-input.ts';
import type { OPERATION_TOOL_NAME } from '../tools/operation-tool.ts';
import type { UPDATE_SCRATCHPAD_TOOL } from '../tools/scratchpad-tool.ts';
import { OpspadError } from './errors.ts';
import { type EventsOptions, type OperationStreamEvent, operationEvents } from './events.ts';
import { type ClientOptions, createTransport, type RequestOptions, segment } from './http.ts';
import { type ResultsFileOptions, type ResultsOptions, results, resultsFile } from './results.ts';
import type {
  ContextFragment,
  ContextRendersPage,
  ConversationOperationsPage,
  EventsPageQuery,
  ExecutionEnded,
  ExecutionStarted,
  GetScratchpadResult,
  ItemResult,
  Liveness,
  OperationAction,
  OperationInput,
  OperationProgress,
  OperationResult,
  PadSettingsInput,
  PadSettingsResult,
  PadVersionsPage,
  PutScratchpadInput,
  PutScratchpadResult,
  Readiness,
  ReadNotesInput,
  ReadNotesResult,
  ReorganizeInput,
  ReorganizeResult,
  ScratchpadEventsPage,
  ToolFormat,
  ToolList,
  ToolName,
  ToolResults,
  TracesPage,
  TracesQuery,
  UpdateScratchpadInput,
  UpdateScratchpadResult,
  VersionsQuery,
  WriteNotesInput,
  WriteNotesResult,
} from './types.ts';

export { OpspadError, type OpspadErrorCode } from './errors.ts';
export type { EventsOptions, OperationEventKind, OperationStreamEvent } from './events.ts';
export type { ClientOptions, RequestOptions } from './http.ts';
export type { ResultsFileOptions, ResultsOptions } from './results.ts';
export { parseServerSentEvents, type ServerSentEvent } from './sse.ts';
export type * from './types.ts';

// The tool names, checked against the server's constants at compile time (type-only imports:
// the client loads none of the server's modules).
const OPERATION_TOOL: typeof OPERATION_TOOL_NAME = 'manage_assistant_operation';
const WRITE_TOOL: typeof WRITE_TOOL_NAME = 'write_to_scratchpad';
const READ_TOOL: typeof READ_TOOL_NAME = 'read_from_scratchpad';
const UPDATE_TOOL: typeof UPDATE_SCRATCHPAD_TOOL = 'update_scratchpad';

/** Options of a tool call. */
export interface ToolCallOptions extends RequestOptions {
  /** Scope notes to this execution (`X-Opspad-Execution`); see `executions.start`. */
  executionId?: string;
}

type Optional<T> = { [K in keyof T]?: T[K] };

export interface OperationsClient {
  /** Creates an operation (and pauses the conversation's active one). */
  create(
    conversationId: string,
    input: OperationInput<'create'>,
    options?: RequestOptions,
  ): Promise<OperationResult<'create'>>;
  /** Leases the next batch (of the active operation unless `operation_id`). */
  progress(
    conversationId: string,
    input?: OperationInput<'progress'>,
    options?: RequestOptions,
  ): Promise<OperationResult<'progress'>>;
  /** Records completed and failed items; idempotent. */
  update(
    conversationId: string,
    input: OperationInput<'update'>,
    options?: RequestOptions,
  ): Promise<OperationResult<'update'>>;
  /** Completes the operation; 409 `items_remaining` while items remain, unless `force`. */
  complete(
    conversationId: string,
    input: OperationInput<'complete'>,
    options?: RequestOptions,
  ): Promise<OperationResult<'complete'>>;
  pause(
    conversationId: string,
    input?: OperationInput<'pause'>,
    options?: RequestOptions,
  ): Promise<OperationResult<'pause'>>;
  resume(
    conversationId: string,
    input: OperationInput<'resume'>,
    options?: RequestOptions,
  ): Promise<OperationResult<'resume'>>;
  cancel(
    conversationId: string,
    input: OperationInput<'cancel'>,
    options?: RequestOptions,
  ): Promise<OperationResult<'cancel'>>;
  /** Everything about the operation, and a page of its failures with their reasons. */
  get(conversationId: string, input?: OperationInput<'get'>, options?: RequestOptions): Promise<OperationResult<'get'>>;
  /** A new operation over the failed items of `operation_id`. */
  retryFailed(
    conversationId: string,
    input: OperationInput<'retry_failed'>,
    options?: RequestOptions,
  ): Promise<OperationResult<'retry_failed'>>;
  /** A conversation's operations, finished ones included, newest first: pass `next_before` as `before` for the next page. */
  list(
    conversationId: string,
    query?: { before?: string; limit?: number },
    options?: RequestOptions,
  ): Promise<ConversationOperationsPage>;
  /** Status and counts of an operation, by id alone. */
  status(operationId: string, options?: RequestOptions): Promise<OperationProgress>;
  /** The operation's progress and audit events, until it ends (`for await … of`). */
  events(operationId: string, options?: EventsOptions): AsyncGenerator<OperationStreamEvent, void, undefined>;
  /** Resolves with the final progress once the operation is completed or cancelled. */
  finished(operationId: string, options?: EventsOptions): Promise<OperationProgress>;
  /** Every item's outcome, in item order, as it streams (`for await … of`); `failed`: only failures. */
  results(operationId: string, options?: ResultsOptions): AsyncGenerator<ItemResult, void, undefined>;
  /** The results file itself (JSON Lines or CSV), as text chunks. */
  resultsFile(operationId: string, options?: ResultsFileOptions): AsyncGenerator<string, void, undefined>;
}

export interface OpspadClient {
  operations: OperationsClient;
  /** The notes scratchpad (`write_to_scratchpad`, `read_from_scratchpad`). */
  notes: {
    write(conversationId: string, input: WriteNotesInput, options?: ToolCallOptions): Promise<WriteNotesResult>;
    read(conversationId: string, input?: ReadNotesInput, options?: ToolCallOptions): Promise<ReadNotesResult>;
  };
  /** Executions scope notes; ending one clears its notes. */
  executions: {
    start(conversationId: string, options?: RequestOptions): Promise<ExecutionStarted>;
    end(executionId: string, options?: RequestOptions): Promise<ExecutionEnded>;
    traces(executionId: string, query?: TracesQuery, options?: RequestOptions): Promise<TracesPage>;
  };
  /** The structured scratchpad. */
  scratchpad: {
    get(conversationId: string, options?: RequestOptions): Promise<GetScratchpadResult>;
    /** Replaces the whole pad, based on `expected_version`. */
    put(conversationId: string, input: PutScratchpadInput, options?: RequestOptions): Promise<PutScratchpadResult>;
    /** Adds, removes or replaces entries (the `update_scratchpad` tool). */
    update(
      conversationId: string,
      input: UpdateScratchpadInput,
      options?: RequestOptions,
    ): Promise<UpdateScratchpadResult>;
    versions(conversationId: string, query?: VersionsQuery, options?: RequestOptions): Promise<PadVersionsPage>;
    events(conversationId: string, query?: EventsPageQuery, options?: RequestOptions): Promise<ScratchpadEventsPage>;
    settings(conversationId: string, input: PadSettingsInput, options?: RequestOptions): Promise<PadSettingsResult>;
    reorganize(conversationId: string, input?: ReorganizeInput, options?: RequestOptions): Promise<ReorganizeResult>;
  };
  /** The context fragment for the system prompt, and what each render said. */
  context: {
    get(conversationId: string, options?: RequestOptions): Promise<ContextFragment>;
    renders(
      conversationId: string,
      query?: Pick<VersionsQuery, 'limit'>,
      options?: RequestOptions,
    ): Promise<ContextRendersPage>;
  };
  /** Tool definitions for function calling, and tool calls as a model makes them. */
  tools: {
    list(query?: { format?: ToolFormat }, options?: RequestOptions): Promise<ToolList>;
    /** Runs `name` with `input` as the model gave it; a refusal is an OpspadError to hand back to the model. */
    call<N extends ToolName>(
      conversationId: string,
      name: N,
      input: unknown,
      options?: ToolCallOptions,
    ): Promise<ToolResults[N]>;
  };
  health: {
    /** `/healthz`. */
    live(options?: RequestOptions): Promise<Liveness>;
    /** `/readyz`: `status` is `not_ready` (the server answered 503) when a check failed or it is shutting down. */
    ready(options?: RequestOptions): Promise<Readiness>;
  };
}

/** A client for the opspad at `baseUrl`, calling as the organization of `apiKey`. */
export function createClient(options: ClientOptions): OpspadClient {
  const http = createTransport(options);
  const conversation = (id: string) => `/v1/conversations/${segment(id)}`;
  const callTool = <T>(conversationId: string, name: string, input: unknown, opts: ToolCallOptions = {}) =>
    http.json<T>({
      method: 'POST',
      path: `${conversation(conversationId)}/tools/${segment(name)}`,
      body: input ?? {},
      headers: opts.executionId ? { 'x-opspad-execution': opts.executionId } : {},
      signal: opts.signal,
    });
  const action =
    <A extends OperationAction>(name: A) =>
    (conversationId: string, input?: Optional<OperationInput<A>>, opts?: RequestOptions) =>
      callTool<OperationResult<A>>(conversationId, OPERATION_TOOL, { ...input, action: name }, opts);

  const events = (operationId: string, opts?: EventsOptions) => operationEvents(http, operationId, opts);

  return {
    operations: {
      create: action('create'),
      progress: action('progress'),
      update: action('update'),
      complete: action('complete'),
      pause: action('pause'),
      resume: action('resume'),
      cancel: action('cancel'),
      get: action('get'),
      retryFailed: action('retry_failed'),
      list: (conversationId, query, opts) =>
        http.json({
          method: 'GET',
          path: `${conversation(conversationId)}/operations`,
          query: { ...query },
          signal: opts?.signal,
        }),
      status: (operationId, opts) =>
        http.json({ method: 'GET', path: `/v1/operations/${segment(operationId)}`, signal: opts?.signal }),
      events,
      results: (operationId, opts) => results(http, operationId, opts),
      resultsFile: (operationId, opts) => resultsFile(http, operationId, opts),
      async finished(operationId, opts) {
        for await (const event of events(operationId, opts)) {
          if (event.event === 'end') {
            return event.data;
          }
        }
        throw new OpspadError('invalid_response', `the event stream of operation ${operationId} ended without end`, {
          status: 0,
        });
      },
    },
    notes: {
      write: (conversationId, input, opts) => callTool(conversationId, WRITE_TOOL, input, opts),
      read: (conversationId, input, opts) => callTool(conversationId, READ_TOOL, input ?? {}, opts),
    },
    executions: {
      start: (conversationId, opts) =>
        http.json({ method: 'POST', path: `${conversation(conversationId)}/executions`, signal: opts?.signal }),
      end: (executionId, opts) =>
        http.json({ method: 'POST', path: `/v1/executions/${segment(executionId)}/end`, signal: opts?.signal }),
      traces: (executionId, query, opts) =>
        http.json({
          method: 'GET',
          path: `/v1/executions/${segment(executionId)}/traces`,
          query: { ...query },
          signal: opts?.signal,
        }),
    },
    scratchpad: {
      get: (conversationId, opts) =>
        http.json({ method: 'GET', path: `${conversation(conversationId)}/scratchpad`, signal: opts?.signal }),
      put: (conversationId, input, opts) =>
        http.json({
          method: 'PUT',
          path: `${conversation(conversationId)}/scratchpad`,
          body: input,
          signal: opts?.signal,
        }),
      update: (conversationId, input, opts) => callTool(conversationId, UPDATE_TOOL, input, opts),
      versions: (conversationId, query, opts) =>
        http.json({
          method: 'GET',
          path: `${conversation(conversationId)}/scratchpad/versions`,
          query: { ...query },
          signal: opts?.signal,
        }),
      events: (conversationId, query, opts) =>
        http.json({
          method: 'GET',
          path: `${conversation(conversationId)}/scratchpad/events`,
          query: { ...query },
          signal: opts?.signal,
        }),
      settings: (conversationId, input, opts) =>
        http.json({
          method: 'PUT',
          path: `${conversation(conversationId)}/scratchpad/settings`,
          body: input,
          signal: opts?.signal,
        }),
      reorganize: (conversationId, input, opts) =>
        http.json({
          method: 'POST',
          path: `${conversation(conversationId)}/scratchpad/reorganize`,
          body: input ?? {},
          signal: opts?.signal,
        }),
    },
    context: {
      get: (conversationId, opts) =>
        http.json({ method: 'GET', path: `${conversation(conversationId)}/context`, signal: opts?.signal }),
      renders: (conversationId, query, opts) =>
        http.json({
          method: 'GET',
          path: `${conversation(conversationId)}/context-renders`,
          query: { ...query },
          signal: opts?.signal,
        }),
    },
    tools: {
      list: (query, opts) => http.json({ method: 'GET', path: '/v1/tools', query: { ...query }, signal: opts?.signal }),
      call: (conversationId, name, input, opts) => callTool(conversationId, name, input, opts),
    },
    health: {
      live: (opts) => http.json({ method: 'GET', path: '/healthz', signal: opts?.signal }),
      ready: (opts) => http.json({ method: 'GET', path: '/readyz', answers: [503], signal: opts?.signal }),
    },
  };
}
