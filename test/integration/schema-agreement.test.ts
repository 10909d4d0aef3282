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
import { TOOL_FORMATS } from '../../src/tools/formats.ts';
import { type Harness, ids, startHarness, type Tenant } from '../helpers/harness.ts';
import { calls, type Format, OP, OPENAI, op, REASONS } from '../helpers/model-calls.ts';

// ajv-formats is CommonJS with a default export: required, so its types and value agree.
const addFormats = createRequire(import.meta.url)('ajv-formats') as FormatsPlugin;

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
