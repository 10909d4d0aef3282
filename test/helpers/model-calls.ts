/**
 * The model-style calls of the agreement test (test/integration/schema-agreement.test.ts): valid
 * ones, wrong ones and OpenAI strict-mode ones, each with the formats whose verdict may differ
 * from the API's, and why.
 */
import { type OpenAiTool, TOOL_FORMATS, type ToolFormat, toolsInFormat } from '../../src/tools/formats.ts';

export type Format = ToolFormat;
export const OPENAI: readonly Format[] = ['openai', 'openai-responses'];
const NOT_OPENAI: readonly Format[] = ['opspad', 'anthropic'];
const ALL: readonly Format[] = TOOL_FORMATS;

/** Why a format's verdict may differ from the API's for a call. */
export const REASONS = {
  crossField: 'a rule between two fields (total_items = item_ids.length, ids unique) no JSON Schema keyword states',
  noConditionals:
    'OpenAI strict mode has no if/then: which action requires or forbids a field is in the descriptions only',
  nullsAccepted:
    'the API reads null as "not given" for strict-mode callers; the other formats do not advertise null, so simple clients see plain types',
  defaultsIgnored:
    'the API ignores another action’s field holding its published default, which strict-mode models send; the per-action schema forbids the field',
  jsonString:
    'the API decodes query_params sent as a string of JSON (how OpenAI strict mode carries an object); the other formats advertise the object',
  jsonContent: 'a string of JSON is checked by the API once decoded; to the schema it is a string',
  noLengths: 'OpenAI strict mode has no minLength/maxLength: the lengths are in the descriptions',
} as const;

export interface ModelCall {
  what: string;
  tool?: string;
  /** `$OP` is replaced by the id of an active operation with items c1…c5 (c1, c2 leased). */
  input: Record<string, unknown>;
  /** Formats whose verdict differs from the API's for this call, and why. */
  except?: { formats: readonly Format[]; reason: keyof typeof REASONS };
}

export const OP = '$OP';
export const op = 'manage_assistant_operation';
/** Every field of the flat operation schema: what a strict model fills, filled by `strict()`. */
const operationFields = Object.keys(
  ((toolsInFormat('openai') as OpenAiTool[])[0]?.function.parameters.properties ?? {}) as object,
);
const strict = (values: Record<string, unknown>) => ({
  ...Object.fromEntries(operationFields.map((field) => [field, null])),
  ...values,
});
const publishedDefaults = {
  batch_size: 5,
  max_parallel_batches: 4,
  lease_seconds: 300,
  force: false,
  failures_limit: 50,
};

export function calls(): ModelCall[] {
  const create = { action: 'create', operation_type: 'send_sms', total_items: 3, item_ids: ['a', 'b', 'c'] };
  return [
    // Valid calls, as models make them.
    { what: 'create, minimal', input: create },
    {
      what: 'create with batch size, notes, execution',
      input: { ...create, batch_size: 2, notes: 'Q2 leads', execution: 'assistant' },
    },
    { what: 'create with query_params', input: { ...create, query_params: { tag: 'Lead', limit: 3 } } },
    { what: 'create with a circuit breaker', input: { ...create, max_failure_rate: 0.2, max_parallel_batches: 2 } },
    { what: 'progress of the active operation', input: { action: 'progress' } },
    { what: 'progress by id with a lease', input: { action: 'progress', operation_id: OP, lease_seconds: 60 } },
    { what: 'update, completed', input: { action: 'update', operation_id: OP, completed_ids: ['c1'] } },
    {
      what: 'update, completed and failed',
      input: { action: 'update', operation_id: OP, completed_ids: ['c1'], failed: [{ id: 'c2', reason: 'no phone' }] },
    },
    {
      what: 'update with the lease owner',
      input: { action: 'update', operation_id: OP, completed_ids: ['c2'], lease_owner: 'assistant' },
    },
    { what: 'complete while items remain (409)', input: { action: 'complete', operation_id: OP } },
    { what: 'complete with force', input: { action: 'complete', operation_id: OP, force: true } },
    { what: 'pause the active operation', input: { action: 'pause' } },
    { what: 'pause by id', input: { action: 'pause', operation_id: OP } },
    { what: 'resume by id', input: { action: 'resume', operation_id: OP } },
    { what: 'cancel by id', input: { action: 'cancel', operation_id: OP } },
    { what: 'get the active operation', input: { action: 'get' } },
    {
      what: 'get a page of failures',
      input: { action: 'get', operation_id: OP, failures_limit: 10, failures_cursor: '0' },
    },
    {
      what: 'retry_failed with nothing failed (409)',
      input: { action: 'retry_failed', operation_id: OP, batch_size: 3 },
    },
    // Wrong calls: both refuse.
    // …the OpenAI formats cannot say which action requires a field (their strict form holds null).
    {
      what: 'update without operation_id',
      input: { action: 'update', completed_ids: ['c1'] },
      except: { formats: OPENAI, reason: 'noConditionals' },
    },
    {
      what: 'complete without operation_id',
      input: { action: 'complete' },
      except: { formats: OPENAI, reason: 'noConditionals' },
    },
    {
      what: 'resume without operation_id',
      input: { action: 'resume' },
      except: { formats: OPENAI, reason: 'noConditionals' },
    },
    {
      what: 'cancel without operation_id',
      input: { action: 'cancel' },
      except: { formats: OPENAI, reason: 'noConditionals' },
    },
    {
      what: 'retry_failed without operation_id',
      input: { action: 'retry_failed' },
      except: { formats: OPENAI, reason: 'noConditionals' },
    },
    {
      what: 'create without item_ids',
      input: { action: 'create', operation_type: 'x', total_items: 1 },
      except: { formats: OPENAI, reason: 'noConditionals' },
    },
    {
      what: 'create without total_items',
      input: { action: 'create', operation_type: 'x', item_ids: ['a'] },
      except: { formats: OPENAI, reason: 'noConditionals' },
    },
    { what: 'create with total_items as a string', input: { ...create, total_items: '3' } },
    { what: 'create with batch_size as a string', input: { ...create, batch_size: '2' } },
    { what: 'create with batch_size 0', input: { ...create, batch_size: 0 } },
    { what: 'create with no ids', input: { ...create, total_items: 0, item_ids: [] } },
    {
      what: 'create with an empty id',
      input: { ...create, item_ids: ['a', '', 'c'] },
      except: { formats: OPENAI, reason: 'noLengths' },
    },
    {
      what: 'create with a 65-character type',
      input: { ...create, operation_type: 'x'.repeat(65) },
      except: { formats: OPENAI, reason: 'noLengths' },
    },
    { what: 'an operation_id that is no UUID', input: { action: 'get', operation_id: 'op-1' } },
    { what: 'an unknown action', input: { action: 'explode' } },
    { what: 'no action', input: { operation_id: OP } },
    { what: 'an unknown field', input: { action: 'get', verbose: true } },
    { what: 'lease_seconds 0', input: { action: 'progress', lease_seconds: 0 } },
    { what: 'failures_limit over 500', input: { action: 'get', failures_limit: 1000 } },
    { what: 'failures_cursor that is no cursor', input: { action: 'get', failures_cursor: 'next' } },
    { what: 'max_failure_rate over 1', input: { ...create, max_failure_rate: 1.5 } },
    { what: 'an unknown execution mode', input: { ...create, execution: 'later' } },
    { what: 'a failure without its reason', input: { action: 'update', operation_id: OP, failed: [{ id: 'c1' }] } },
    {
      what: 'progress with another action’s field holding a value',
      input: { action: 'progress', batch_size: 10 },
      except: { formats: OPENAI, reason: 'noConditionals' },
    },
    {
      what: 'pause with force',
      input: { action: 'pause', force: true },
      except: { formats: OPENAI, reason: 'noConditionals' },
    },
    // Rules between fields.
    {
      what: 'total_items that is not the number of ids',
      input: { ...create, total_items: 4 },
      except: { formats: ALL, reason: 'crossField' },
    },
    {
      what: 'a repeated id',
      input: { ...create, item_ids: ['a', 'b', 'a'] },
      except: { formats: ALL, reason: 'crossField' },
    },
    // OpenAI strict mode: every field, null or the advertised default where not meant.
    {
      what: 'strict create, nulls',
      input: strict(create),
      except: { formats: NOT_OPENAI, reason: 'nullsAccepted' },
    },
    {
      what: 'strict progress, nulls',
      input: strict({ action: 'progress' }),
      except: { formats: NOT_OPENAI, reason: 'nullsAccepted' },
    },
    {
      what: 'strict update, nulls',
      input: strict({ action: 'update', operation_id: OP, completed_ids: ['c1'] }),
      except: { formats: NOT_OPENAI, reason: 'nullsAccepted' },
    },
    {
      what: 'strict complete, other fields at their defaults',
      input: strict({ ...publishedDefaults, action: 'complete', operation_id: OP, force: true }),
      except: { formats: NOT_OPENAI, reason: 'defaultsIgnored' },
    },
    {
      what: 'strict get, other fields at their defaults',
      input: strict({ ...publishedDefaults, action: 'get', operation_id: OP }),
      except: { formats: NOT_OPENAI, reason: 'defaultsIgnored' },
    },
    {
      what: 'strict create with query_params as a string of JSON',
      input: strict({ ...create, query_params: '{"url":"https://example.com/hook"}' }),
      except: { formats: NOT_OPENAI, reason: 'jsonString' },
    },
    {
      what: 'strict create with query_params that is no JSON object',
      input: strict({ ...create, query_params: 'url=https://example.com' }),
      except: { formats: OPENAI, reason: 'jsonContent' },
    },
    {
      what: 'strict update with operation_id null',
      input: strict({ action: 'update', completed_ids: ['c1'] }),
      except: { formats: OPENAI, reason: 'noConditionals' },
    },
    {
      what: 'strict progress with batch_size off its default',
      input: strict({ action: 'progress', batch_size: 10 }),
      except: { formats: OPENAI, reason: 'noConditionals' },
    },
    { what: 'strict create with batch_size as a string', input: strict({ ...create, batch_size: '2' }) },
    // The scratchpad tools.
    { what: 'write a note', tool: 'write_to_scratchpad', input: { notes: 'plan: text every Lead' } },
    {
      what: 'write with the reference’s alias',
      tool: 'write_to_scratchpad',
      input: { notes: 'found 30 Leads', include_history: true },
    },
    {
      what: 'strict write, null history',
      tool: 'write_to_scratchpad',
      input: { notes: 'x', return_history: null, include_history: null },
      except: { formats: NOT_OPENAI, reason: 'nullsAccepted' },
    },
    {
      what: 'write an empty note',
      tool: 'write_to_scratchpad',
      input: { notes: '' },
      except: { formats: OPENAI, reason: 'noLengths' },
    },
    { what: 'write without notes', tool: 'write_to_scratchpad', input: { return_history: true } },
    { what: 'read the notes', tool: 'read_from_scratchpad', input: {} },
    {
      what: 'read with a persistent note',
      tool: 'read_from_scratchpad',
      input: { persistent_notes: 'answer in French' },
    },
    {
      what: 'add a fact with its ref',
      tool: 'update_scratchpad',
      input: {
        add: {
          refs: [{ id: 'crm:search-1', kind: 'tool_call', label: 'contacts tagged Lead' }],
          facts: [{ text: '30 Leads', source_ref: 'crm:search-1' }],
        },
      },
    },
    {
      what: 'add a fact without a ref',
      tool: 'update_scratchpad',
      input: { add: { facts: [{ text: '30 Leads' }] } },
    },
    { what: 'expected_version as a string', tool: 'update_scratchpad', input: { expected_version: '1', task: 'x' } },
  ];
}
