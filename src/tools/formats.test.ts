/**
 * Tool definitions per vendor. The OpenAI format must hold strict mode's rules in every nested
 * schema (every property required, `additionalProperties: false` on every object, supported
 * keywords and formats only, no `default`), turn optional fields into nullable ones, and the
 * calls a strict model makes with it — every field present, null for those it leaves out — must
 * pass opspad's own validation. The Anthropic format is the definitions' schema as it is.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ReadFromScratchpadInput, WriteToScratchpadInput } from '../domain/notes-input.ts';
import { OPERATION_ACTIONS, OperationToolInput } from '../domain/operation-input.ts';
import { UpdateScratchpadInput } from '../domain/scratchpad-input.ts';
import { type JsonSchema, toolDefinitions } from './definitions.ts';
import { normalizeFlatInput } from './flat-input.ts';
import {
  acceptsNull,
  JSON_STRING_HINT,
  OPENAI_NULL_HINT,
  OPENAI_STRICT_FORMATS,
  OPENAI_STRICT_KEYWORDS,
  type OpenAiTool,
  toOpenAiStrictSchema,
  toolsInFormat,
} from './formats.ts';

const definitions = toolDefinitions();
const openAiTools = toolsInFormat('openai') as OpenAiTool[];

function isRecord(value: unknown): value is JsonSchema {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function isObjectSchema(schema: JsonSchema): boolean {
  return schema.type === 'object' || (Array.isArray(schema.type) && schema.type.includes('object'));
}

/** Every schema node under `schema` (itself included), with its path and object depth. */
function* walk(schema: JsonSchema, path = '(root)', depth = 1): Generator<[JsonSchema, string, number]> {
  yield [schema, path, depth];
  const childDepth = isObjectSchema(schema) ? depth + 1 : depth;
  for (const [name, property] of Object.entries((schema.properties as Record<string, JsonSchema>) ?? {})) {
    yield* walk(property, `${path}.${name}`, childDepth);
  }
  if (isRecord(schema.items)) {
    yield* walk(schema.items, `${path}[]`, depth);
  }
  for (const [i, branch] of ((schema.anyOf as JsonSchema[]) ?? []).entries()) {
    yield* walk(branch, `${path}|${i}`, depth);
  }
  for (const [name, def] of Object.entries((schema.$defs as Record<string, JsonSchema>) ?? {})) {
    yield* walk(def, `$defs.${name}`, 1);
  }
}

/** The object schema reached by `path` (property names; `[]` steps into items), skipping nulls. */
function objectAt(schema: JsonSchema, path: readonly string[]): JsonSchema | undefined {
  let node: JsonSchema | undefined = schema;
  for (const step of path) {
    const nonNull: JsonSchema | undefined = Array.isArray(node?.anyOf)
      ? (node.anyOf as JsonSchema[]).find((b) => b.type !== 'null')
      : node;
    node = step === '[]' ? (nonNull?.items as JsonSchema) : (nonNull?.properties as Record<string, JsonSchema>)?.[step];
  }
  return Array.isArray(node?.anyOf) ? (node.anyOf as JsonSchema[]).find((b) => b.type !== 'null') : node;
}

/** Paths (as steps) of every object schema with properties under `schema`. */
function objectPaths(schema: JsonSchema, path: string[] = []): string[][] {
  const node = objectAt(schema, []) ?? schema;
  const paths: string[][] = isRecord(node.properties) ? [path] : [];
  for (const [name, property] of Object.entries((node.properties as Record<string, JsonSchema>) ?? {})) {
    paths.push(...objectPaths(property, [...path, name]));
  }
  if (isRecord(node.items)) {
    paths.push(...objectPaths(node.items, [...path, '[]']));
  }
  return paths;
}

/**
 * What a strict model may send: every property present; a nullable scalar null; objects and
 * arrays filled in (so nested nulls are exercised too).
 */
function strictInstance(schema: JsonSchema): unknown {
  const node = Array.isArray(schema.anyOf) ? (schema.anyOf as JsonSchema[]).find((b) => b.type !== 'null') : schema;
  if (!node) {
    return null;
  }
  const types = (Array.isArray(node.type) ? node.type : [node.type]).filter((t) => t !== 'null');
  if (Array.isArray(node.enum)) {
    return node.enum.find((value) => value !== null);
  }
  switch (types[0]) {
    case 'object':
      return Object.fromEntries(
        Object.entries(node.properties as Record<string, JsonSchema>).map(([name, property]) => {
          const inner = objectAt(property, []);
          const scalar = !inner || !(isObjectSchema(inner) || inner.type === 'array' || inner.items !== undefined);
          return [name, scalar && acceptsNull(property) ? null : strictInstance(property)];
        }),
      );
    case 'array':
      return [strictInstance(node.items as JsonSchema)];
    case 'string':
      return node.format === 'uuid' ? randomUUID() : 'x';
    case 'integer':
      return typeof node.minimum === 'number' ? node.minimum : 0;
    case 'number':
      return 0.5;
    case 'boolean':
      return true;
    default:
      return null;
  }
}

function strictParameters(name: string): JsonSchema {
  const tool = openAiTools.find((t) => t.function.name === name);
  if (!tool) {
    throw new Error(`no openai tool ${name}`);
  }
  return tool.function.parameters;
}

describe('the OpenAI format', () => {
  it('wraps each definition as a strict function with the same name and description', () => {
    expect(openAiTools.map((tool) => tool.function.name)).toEqual(definitions.map((d) => d.name));
    for (const [i, tool] of openAiTools.entries()) {
      expect(Object.keys(tool).sort()).toEqual(['function', 'type']);
      expect(tool.type).toBe('function');
      expect(tool.function.strict).toBe(true);
      expect(tool.function.description).toBe(`${definitions[i]?.description} ${OPENAI_NULL_HINT}`);
      expect(tool.function.parameters.type).toBe('object');
      expect(tool.function.parameters).not.toHaveProperty('anyOf');
    }
  });

  it.each(definitions.map((d) => d.name))('%s: every nested schema holds the strict-mode rules', (name) => {
    const parameters = strictParameters(name);
    let objects = 0;
    let properties = 0;
    let enumValues = 0;
    for (const [node, path, depth] of walk(parameters)) {
      for (const key of Object.keys(node)) {
        expect(OPENAI_STRICT_KEYWORDS.has(key), `${path}: "${key}" is not a strict-mode keyword`).toBe(true);
      }
      expect(node, path).not.toHaveProperty('default');
      if (node.format !== undefined) {
        expect(OPENAI_STRICT_FORMATS.has(node.format as string), `${path}: format ${node.format}`).toBe(true);
      }
      if (Array.isArray(node.enum)) {
        enumValues += node.enum.length;
      }
      if (isObjectSchema(node) || node.properties !== undefined) {
        objects += 1;
        expect(node.additionalProperties, `${path}: additionalProperties`).toBe(false);
        expect(isRecord(node.properties), `${path}: an object without properties`).toBe(true);
        const keys = Object.keys(node.properties as JsonSchema);
        properties += keys.length;
        expect([...(node.required as string[])].sort(), `${path}: required`).toEqual([...keys].sort());
        expect(depth, `${path}: nesting`).toBeLessThanOrEqual(10);
      }
    }
    expect(objects).toBeGreaterThan(0);
    expect(properties).toBeLessThanOrEqual(5000);
    expect(enumValues).toBeLessThanOrEqual(1000);
  });

  it.each(definitions.map((d) => d.name))(
    '%s: a property that was optional accepts null; a required one is unchanged',
    (name) => {
      const original = definitions.find((d) => d.name === name)?.input_schema as JsonSchema;
      const strict = strictParameters(name);
      const paths = objectPaths(original);
      expect(paths.length).toBeGreaterThan(0);
      for (const path of paths) {
        const before = objectAt(original, path) as JsonSchema;
        const after = objectAt(strict, path) as JsonSchema;
        expect(after, path.join('.')).toBeDefined();
        const required = new Set((before.required as string[]) ?? []);
        for (const [property, schema] of Object.entries(before.properties as Record<string, JsonSchema>)) {
          const converted = (after.properties as Record<string, JsonSchema>)[property];
          if (!converted) {
            continue; // left out (free-form), checked below
          }
          const where = [...path, property].join('.');
          expect(acceptsNull(converted), where).toBe(required.has(property) ? acceptsNull(schema) : true);
        }
      }
    },
  );

  it('keeps the supported constraints and moves defaults and string lengths into descriptions', () => {
    const properties = strictParameters('manage_assistant_operation').properties as Record<string, JsonSchema>;
    expect(properties.action).toMatchObject({ type: 'string', enum: [...OPERATION_ACTIONS] });
    expect(properties.batch_size?.description).toContain('Default: 5.');
    expect(JSON.stringify(properties.batch_size)).toContain('"maximum":10000');
    expect(properties.force).toMatchObject({ type: ['boolean', 'null'] });
    expect(properties.force?.description).toContain('Default: false.');
    expect(properties.operation_type?.description).toContain('1 to 64 characters.');
    expect(properties.item_ids).toMatchObject({ type: ['array', 'null'], minItems: 1 });
    // uuid is a supported format; zod's equivalent pattern is dropped with it.
    expect(JSON.stringify(properties.operation_id)).toContain('"format":"uuid"');
    expect(JSON.stringify(properties.operation_id)).not.toContain('pattern');
    expect(JSON.stringify(properties.failures_cursor)).toContain('"pattern"');
    const notes = strictParameters('write_to_scratchpad').properties as Record<string, JsonSchema>;
    expect(notes.notes?.description).toContain('1 to 20000 characters.');
    expect(notes.return_history).toMatchObject({ type: ['boolean', 'null'] });
  });

  it('carries a free-form object (query_params) as a string of JSON, and leaves out no field', () => {
    const original = definitions[0]?.input_schema.properties as JsonSchema;
    const strict = strictParameters('manage_assistant_operation').properties as Record<string, JsonSchema>;
    expect(Object.keys(strict)).toEqual(Object.keys(original));
    expect(strict.query_params).toMatchObject({ type: ['string', 'null'] });
    expect(strict.query_params?.description).toContain(JSON_STRING_HINT);
  });

  it('drops the root if/then/else (strict mode has no conditionals); the per-action rules stay in the descriptions', () => {
    const strict = strictParameters('manage_assistant_operation');
    expect(definitions[0]?.input_schema).toHaveProperty('if');
    expect(strict).not.toHaveProperty('if');
    expect(strict).not.toHaveProperty('else');
    const properties = strict.properties as Record<string, JsonSchema>;
    expect(properties.action?.description).toContain('update (needs operation_id)');
    expect(properties.operation_id?.description).toContain(
      'Required for update, complete, resume, cancel, retry_failed; optional for progress, pause, get.',
    );
  });

  it('converts any schema: nullable by type or anyOf, $defs and anyOf branches, free-form objects as JSON strings', () => {
    const strict = toOpenAiStrictSchema({
      type: 'object',
      properties: {
        a: { type: 'string', minLength: 2, default: 'zz' },
        b: { type: 'string', enum: ['x', 'y'], description: 'B.' },
        c: { $ref: '#/$defs/thing' },
        d: {
          anyOf: [
            { type: 'object', properties: { e: { type: 'integer' } } },
            { type: 'string', format: 'ulid' },
          ],
        },
        f: { type: 'object', additionalProperties: { type: 'string' }, description: 'F.' },
      },
      required: ['c'],
      $defs: { thing: { type: 'object', properties: { g: { type: 'number' } }, propertyNames: { type: 'string' } } },
    });
    expect(strict).toEqual({
      type: 'object',
      properties: {
        a: { type: ['string', 'null'], description: 'At least 2 characters. Default: "zz".' },
        b: { description: 'B.', anyOf: [{ type: 'string', enum: ['x', 'y'] }, { type: 'null' }] },
        c: { $ref: '#/$defs/thing' },
        d: {
          anyOf: [
            {
              type: 'object',
              properties: { e: { type: ['integer', 'null'] } },
              required: ['e'],
              additionalProperties: false,
            },
            { type: 'string' },
            { type: 'null' },
          ],
        },
        f: { type: ['string', 'null'], description: `F. ${JSON_STRING_HINT}` },
      },
      required: ['a', 'b', 'c', 'd', 'f'],
      additionalProperties: false,
      $defs: {
        thing: {
          type: 'object',
          properties: { g: { type: ['number', 'null'] } },
          required: ['g'],
          additionalProperties: false,
        },
      },
    });
    expect(toOpenAiStrictSchema({ type: 'object', properties: { m: { type: 'object' } }, required: ['m'] })).toEqual({
      type: 'object',
      properties: { m: { type: 'string', description: JSON_STRING_HINT } },
      required: ['m'],
      additionalProperties: false,
    });
  });
});

describe('calls a strict model makes with the OpenAI schemas', () => {
  const operationKeys = Object.keys(strictParameters('manage_assistant_operation').properties as JsonSchema);
  const allNull = Object.fromEntries(operationKeys.map((key) => [key, null]));
  const operationId = randomUUID();
  const byAction: Record<(typeof OPERATION_ACTIONS)[number], Record<string, unknown>> = {
    create: { operation_type: 'send_sms', total_items: 1, item_ids: ['c1'] },
    progress: {},
    update: { operation_id: operationId, completed_ids: ['c1'] },
    complete: { operation_id: operationId },
    resume: { operation_id: operationId },
    pause: {},
    cancel: { operation_id: operationId },
    get: {},
    retry_failed: { operation_id: operationId },
  };

  it.each(OPERATION_ACTIONS)(
    'manage_assistant_operation %s: every field present, null when unused, passes validation',
    (action) => {
      const call = { ...allNull, action, ...byAction[action] };
      expect(Object.keys(call).sort()).toEqual([...operationKeys].sort());
      const parsed = OperationToolInput.safeParse(normalizeFlatInput(call));
      expect(parsed.success, JSON.stringify(parsed.error?.issues)).toBe(true);
      expect(parsed.data).toMatchObject({ action, ...byAction[action] });
      // Without dropping them, the nulls of other actions' fields fail as unknown fields.
      if (action !== 'create') {
        expect(OperationToolInput.safeParse(call).success).toBe(false);
      }
    },
  );

  it.each(OPERATION_ACTIONS)(
    'manage_assistant_operation %s: other actions’ fields holding their published defaults pass too',
    (action) => {
      const defaults = { batch_size: 5, max_parallel_batches: 4, lease_seconds: 300, force: false, failures_limit: 50 };
      const call = { ...allNull, ...defaults, action, ...byAction[action] };
      const parsed = OperationToolInput.safeParse(normalizeFlatInput(call));
      expect(parsed.success, JSON.stringify(parsed.error?.issues)).toBe(true);
      expect(parsed.data).toMatchObject({ action, ...byAction[action] });
    },
  );

  it.each([
    ['write_to_scratchpad', WriteToScratchpadInput],
    ['read_from_scratchpad', ReadFromScratchpadInput],
    ['update_scratchpad', UpdateScratchpadInput],
  ] as const)(
    '%s: a call with every field, nested objects filled and scalars null, passes validation',
    (name, schema) => {
      const call = strictInstance(strictParameters(name)) as Record<string, unknown>;
      expect(Object.keys(call).sort()).toEqual(Object.keys(strictParameters(name).properties as JsonSchema).sort());
      const parsed = schema.safeParse(call);
      expect(parsed.success, `${JSON.stringify(call)}: ${JSON.stringify(parsed.error?.issues)}`).toBe(true);
    },
  );

  it('exercises nested nulls in update_scratchpad (refs label and excerpt, goals source_ref)', () => {
    const call = strictInstance(strictParameters('update_scratchpad')) as {
      add: { refs: Record<string, unknown>[]; goals: Record<string, unknown>[] };
    };
    expect(call.add.refs[0]).toEqual({ id: 'x', kind: 'x', label: null, excerpt: null });
    expect(call.add.goals[0]).toEqual({ text: 'x', source_ref: null });
  });
});
