/**
 * The published schemas tell the truth: model-style calls — valid ones, wrong ones, and OpenAI
 * strict-mode ones (every field present, null or the advertised default for those not meant) —
 * are each validated with ajv (a validator nobody here wrote) against every published format
 * (`opspad`, which `opspad mcp` serves, `anthropic`, `openai`, `openai-responses`) and sent to
 * the API. The schema's verdict ("valid") must match the API's ("not refused as bad input":
 * any status but 400; 404 and 409 are about state, not shape), except where a rule cannot be
 * written in a format, listed with each call below with the reason. Each listed exception must
 * really disagree, so the list cannot grow stale.
 *
 * A strict-mode model cannot leave a field out, so against the OpenAI formats each call is
 * checked as such a model sends it: every field it left out present as null, at every level. That
 * form is sent to the API too (null must mean "not given" there), and its verdict is the one the
 * OpenAI formats are held to.
 */
import { randomUUID } from 'node:crypto';
import { createRequire } from 'node:module';
import type { ValidateFunction } from 'ajv';
import { Ajv2020 } from 'ajv/dist/2020.js';
import type { FormatsPlugin } from 'ajv-formats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { JsonSchema } from '../../src/tools/definitions.ts';
import { TOOL_FORMATS, type ToolFormat } from '../../src/tools/formats.ts';
import { type Harness, ids, startHarness, type Tenant } from '../helpers/harness.ts';

// ajv-formats is CommonJS with a default export: required, so its types and value agree.
const addFormats = createRequire(import.meta.url)('ajv-formats') as FormatsPlugin;

type Format = ToolFormat;
const OPENAI: readonly Format[] = ['openai', 'openai-responses'];
const NOT_OPENAI: readonly Format[] = ['opspad', 'anthropic'];
const ALL: readonly Format[] = TOOL_FORMATS;

/** Why a format's verdict may differ from the API's for a call. */
const REASONS = {
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

interface ModelCall {
  what: string;
  tool?: string;
  /** `$OP` is replaced by the id of an active operation with items c1…c5 (c1, c2 leased). */
  input: Record<string, unknown>;
  /** Formats whose verdict differs from the API's for this call, and why. */
  except?: { formats: readonly Format[]; reason: keyof typeof REASONS };
}

const OP = '$OP';
const op = 'manage_assistant_operation';
/** Every field of the flat operation schema (what a strict model fills), filled by `strict()`. */
let operationFields: string[] = [];
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

function calls(): ModelCall[] {
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

/** The schema node that is not the null branch (strict mode's nullable fields are anyOf or type lists). */
function nonNull(schema: JsonSchema): JsonSchema {
  const branch = Array.isArray(schema.anyOf)
    ? (schema.anyOf as JsonSchema[]).find((candidate) => candidate.type !== 'null')
    : undefined;
  return branch ?? schema;
}

/**
 * `value` as a strict-mode model sends it under `schema`: every property present, null when left
 * out, and an object the schema carries as a string of JSON (query_params) encoded.
 */
function strictForm(schema: JsonSchema, value: unknown): unknown {
  const node = nonNull(schema);
  const types = Array.isArray(node.type) ? node.type : [node.type];
  if (value && typeof value === 'object' && !Array.isArray(value) && types.includes('string')) {
    return JSON.stringify(value);
  }
  if (Array.isArray(value) && node.items) {
    return value.map((item) => strictForm(node.items as JsonSchema, item));
  }
  if (value && typeof value === 'object' && !Array.isArray(value) && node.properties) {
    const properties = node.properties as Record<string, JsonSchema>;
    const record = value as Record<string, unknown>;
    return {
      ...Object.fromEntries(Object.keys(properties).map((name) => [name, null])),
      ...Object.fromEntries(
        Object.entries(record).map(([name, item]) => [
          name,
          properties[name] ? strictForm(properties[name], item) : item,
        ]),
      ),
    };
  }
  return value;
}

function substitute(value: unknown, operationId: string): unknown {
  if (value === OP) {
    return operationId;
  }
  if (Array.isArray(value)) {
    return value.map((item) => substitute(item, operationId));
  }
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, substitute(item, operationId)]));
  }
  return value;
}

describe('model-style calls: ajv on every published format agrees with the API', () => {
  let harness: Harness;
  let tenant: Tenant;
  /** validators[format][tool] */
  const validators = new Map<Format, Map<string, ValidateFunction>>();
  /** The OpenAI parameters of each tool, to put calls in their strict form. */
  const strictSchemas = new Map<string, JsonSchema>();

  beforeAll(async () => {
    harness = await startHarness('pglite');
    tenant = await harness.newTenant();
    for (const format of TOOL_FORMATS) {
      // strict: the schemas must be valid JSON Schema 2020-12 with no keyword ajv does not know.
      // (Not strictRequired: a `then` requiring a field the root declares is plain JSON Schema.)
      const ajv = new Ajv2020({ strict: true, strictRequired: false, allErrors: true });
      addFormats(ajv);
      const published = await tenant.get<{ tools: Record<string, unknown>[] }>(`/v1/tools?format=${format}`);
      const byTool = new Map<string, ValidateFunction>();
      for (const tool of published.body.tools) {
        const fn = (tool.function ?? tool) as { name: string; parameters?: JsonSchema; input_schema?: JsonSchema };
        byTool.set(fn.name, ajv.compile((fn.parameters ?? fn.input_schema) as JsonSchema));
        if (format === 'openai') {
          strictSchemas.set(fn.name, fn.parameters as JsonSchema);
          if (fn.name === op) {
            operationFields = Object.keys((fn.parameters as { properties: object }).properties);
          }
        }
      }
      validators.set(format, byTool);
    }
  });
  afterAll(async () => {
    await harness.close();
  });

  it('has at least 50 calls, each sent to the API and checked against each of the 4 formats', async () => {
    const list = calls();
    expect(list.length).toBeGreaterThanOrEqual(50);
    expect(operationFields.length).toBeGreaterThan(10);
    const disagreements: string[] = [];
    const staleExceptions: string[] = [];
    /** The API's answer to `input`, in a conversation of its own with an operation of 5 items, 2 leased. */
    const send = async (tool: string, input: unknown) => {
      const conversation = randomUUID();
      const setup = await tenant.op(conversation, {
        action: 'create',
        operation_type: 'setup',
        total_items: 5,
        item_ids: ids(5).map((_, i) => `c${i + 1}`),
        batch_size: 2,
      });
      const operationId = setup.body.operation_id as string;
      await tenant.op(conversation, { action: 'progress' });
      const sent = substitute(input, operationId) as Record<string, unknown>;
      return { sent, answer: await tenant.tool(conversation, sent, tool) };
    };
    for (const call of list) {
      const tool = call.tool ?? op;
      const plain = await send(tool, call.input);
      const strictInput = strictForm(strictSchemas.get(tool) as JsonSchema, call.input);
      const strictCall =
        JSON.stringify(strictInput) === JSON.stringify(call.input) ? plain : await send(tool, strictInput);
      for (const format of TOOL_FORMATS) {
        const { sent: input, answer } = OPENAI.includes(format) ? strictCall : plain;
        const apiAccepts = answer.status !== 400;
        const validate = validators.get(format)?.get(tool) as ValidateFunction;
        const schemaAccepts = validate(input);
        const excepted = call.except?.formats.includes(format) ?? false;
        const line = `${call.what} [${format}]: schema ${schemaAccepts ? 'accepts' : 'refuses'}, API ${answer.status} ${apiAccepts ? '' : JSON.stringify(answer.body).slice(0, 200)}`;
        if (excepted && schemaAccepts === apiAccepts) {
          staleExceptions.push(`${line} — listed as an exception (${call.except?.reason}) but they agree`);
        } else if (!excepted && schemaAccepts !== apiAccepts) {
          disagreements.push(`${line}${schemaAccepts ? '' : ` ${JSON.stringify(validate.errors?.slice(0, 2))}`}`);
        }
      }
    }
    expect(disagreements).toEqual([]);
    expect(staleExceptions).toEqual([]);
  }, 240_000);

  it('gives each exception a reason', () => {
    for (const call of calls().filter((c) => c.except)) {
      expect(REASONS[call.except?.reason as keyof typeof REASONS]).toBeTruthy();
    }
  });
});
