/**
 * The tool definitions in each vendor's function-calling format, for `GET /v1/tools?format=…`
 * and `opspad tools print`:
 *
 * - `opspad` (the default, and what `opspad mcp` serves): `{name, description, input_schema}` as
 *   generated from zod: optional fields carry no null branch, and the operation tool's per-action
 *   rules are an if/then/else chain at the root (no top-level anyOf/oneOf/allOf).
 * - `anthropic`: `{name, description, input_schema}` — the Messages API's tool shape, which takes
 *   our JSON Schema as it is.
 * - `openai` (Chat Completions): `{type: "function", function: {name, description, parameters,
 *   strict: true}}`; `openai-responses` (Responses API): `{type: "function", name, description,
 *   parameters, strict: true}`. The schema is rewritten into the subset Structured Outputs
 *   accepts in strict mode:
 *   every object lists every property in `required` and has `additionalProperties: false`; a
 *   property that was optional accepts `null` instead (our zod schemas read null as "not given");
 *   only supported keywords stay (`pattern`, the supported `format`s, `minimum`/`maximum`/
 *   `exclusive*`/`multipleOf`, `minItems`/`maxItems`); `default` (refused: "'default' is not
 *   permitted") and `minLength`/`maxLength` move into the description; the root's if/then/else
 *   goes (the per-action rules stay in the descriptions); a free-form object (a map with no
 *   declared properties, such as `query_params`) becomes a string of JSON, which opspad decodes.
 *   A strict model fills every field, so opspad ignores a field of another action that is null
 *   or holds its published default (tools/flat-input.ts).
 */
import { z } from 'zod';
import { parseOrThrow } from '../domain/validation.ts';
import { type JsonSchema, type ToolDefinition, toolDefinitions } from './definitions.ts';

export const TOOL_FORMATS = ['opspad', 'openai', 'openai-responses', 'anthropic'] as const;
export type ToolFormat = (typeof TOOL_FORMATS)[number];

export function isToolFormat(value: unknown): value is ToolFormat {
  return (TOOL_FORMATS as readonly unknown[]).includes(value);
}

export interface OpenAiTool {
  type: 'function';
  function: { name: string; description: string; parameters: JsonSchema; strict: true };
}

/** The Responses API's function tool: the Chat Completions one without the `function` wrapper. */
export interface OpenAiResponsesTool {
  type: 'function';
  name: string;
  description: string;
  parameters: JsonSchema;
  strict: true;
}

export interface AnthropicTool {
  name: string;
  description: string;
  input_schema: JsonSchema;
}

/** Keywords strict mode accepts; everything else is dropped (or folded into the description). */
export const OPENAI_STRICT_KEYWORDS: ReadonlySet<string> = new Set([
  'type',
  'description',
  'title',
  'enum',
  'const',
  'anyOf',
  'properties',
  'required',
  'additionalProperties',
  'items',
  '$ref',
  '$defs',
  'pattern',
  'format',
  'multipleOf',
  'minimum',
  'maximum',
  'exclusiveMinimum',
  'exclusiveMaximum',
  'minItems',
  'maxItems',
]);

/** The string formats strict mode supports. */
export const OPENAI_STRICT_FORMATS: ReadonlySet<string> = new Set([
  'date-time',
  'time',
  'date',
  'duration',
  'email',
  'hostname',
  'ipv4',
  'ipv6',
  'uuid',
]);

function isRecord(value: unknown): value is JsonSchema {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Whether `schema` accepts null. */
export function acceptsNull(schema: JsonSchema): boolean {
  const { type, anyOf } = schema;
  if (type === 'null' || (Array.isArray(type) && type.includes('null'))) {
    return true;
  }
  if (Array.isArray(schema.enum) && schema.enum.includes(null)) {
    return true;
  }
  return Array.isArray(anyOf) && anyOf.some((branch) => isRecord(branch) && acceptsNull(branch));
}

/** `schema`, also accepting null: `type: [t, "null"]` for a plain type, else a null branch of `anyOf`. */
function nullable(schema: JsonSchema): JsonSchema {
  if (acceptsNull(schema)) {
    return schema;
  }
  if (typeof schema.type === 'string' && schema.enum === undefined && schema.const === undefined) {
    return { ...schema, type: [schema.type, 'null'] };
  }
  if (Array.isArray(schema.anyOf)) {
    return { ...schema, anyOf: [...schema.anyOf, { type: 'null' }] };
  }
  const { description, ...rest } = schema;
  return { ...(description === undefined ? {} : { description }), anyOf: [rest, { type: 'null' }] };
}

function lengthNote(min: unknown, max: unknown): string | undefined {
  const minimum = typeof min === 'number' && min > 0 ? min : undefined;
  const maximum = typeof max === 'number' ? max : undefined;
  if (minimum !== undefined && maximum !== undefined) {
    return `${minimum} to ${maximum} characters.`;
  }
  if (maximum !== undefined) {
    return `At most ${maximum} characters.`;
  }
  return minimum === undefined ? undefined : `At least ${minimum} characters.`;
}

/** A free-form object: a map of anything, which strict mode cannot express. */
export function isFreeFormObject(schema: JsonSchema): boolean {
  const isObject = schema.type === 'object' || (Array.isArray(schema.type) && schema.type.includes('object'));
  return isObject && !isRecord(schema.properties) && schema.$ref === undefined;
}

/** How a free-form object travels in strict mode: a string holding its JSON. */
export const JSON_STRING_HINT =
  'A JSON object, sent as a string of JSON (strict mode cannot describe the object), e.g. \'{"url":"https://example.com/hook"}\'.';

/** A free-form object as strict mode can carry it: a string of JSON, which opspad decodes. */
function jsonStringNode(schema: JsonSchema): JsonSchema {
  const described = typeof schema.description === 'string' ? `${schema.description} ` : '';
  return { type: 'string', description: `${described}${JSON_STRING_HINT}` };
}

/**
 * One schema node in strict form, or `undefined` when it cannot be expressed (an anyOf left
 * with nothing but null). A free-form object becomes a string of JSON.
 */
function strictNode(schema: JsonSchema, path: string): JsonSchema | undefined {
  if (isFreeFormObject(schema)) {
    return jsonStringNode(schema);
  }
  const notes: string[] = [];
  const out: JsonSchema = {};
  for (const [key, value] of Object.entries(schema)) {
    if (!OPENAI_STRICT_KEYWORDS.has(key)) {
      continue;
    }
    switch (key) {
      case 'properties':
      case 'required':
      case 'additionalProperties':
        break; // rebuilt below
      case 'items':
        if (isRecord(value)) {
          const items = strictNode(value, `${path}[]`);
          if (!items) {
            return undefined;
          }
          out.items = items;
        }
        break;
      case 'anyOf': {
        const branches = (value as unknown[])
          .filter(isRecord)
          .map((branch) => strictNode(branch, path))
          .filter((branch): branch is JsonSchema => branch !== undefined);
        if (branches.length === 0 || branches.every((branch) => branch.type === 'null')) {
          return undefined;
        }
        out.anyOf = branches;
        break;
      }
      case '$defs':
        out.$defs = Object.fromEntries(
          Object.entries(value as Record<string, JsonSchema>).map(([name, def]) => {
            const converted = strictNode(def, `$defs.${name}`);
            if (!converted) {
              throw new Error(`${path}: $defs.${name} cannot be expressed in strict mode`);
            }
            return [name, converted];
          }),
        );
        break;
      case 'format':
        if (typeof value === 'string' && OPENAI_STRICT_FORMATS.has(value)) {
          out.format = value;
        }
        break;
      default:
        out[key] = value;
    }
  }
  // A supported format says it all; zod adds a long equivalent pattern (e.g. for uuid).
  if (out.format !== undefined) {
    delete out.pattern;
  }
  const length = lengthNote(schema.minLength, schema.maxLength);
  if (length) {
    notes.push(length);
  }
  if (schema.default !== undefined) {
    notes.push(`Default: ${JSON.stringify(schema.default)}.`);
  }
  if (notes.length > 0) {
    out.description = [typeof out.description === 'string' ? out.description : '', ...notes].join(' ').trim();
  }
  if (isRecord(schema.properties)) {
    const required = new Set(Array.isArray(schema.required) ? (schema.required as string[]) : []);
    const properties: Record<string, JsonSchema> = {};
    for (const [name, property] of Object.entries(schema.properties)) {
      const converted = isRecord(property) ? strictNode(property, `${path}.${name}`) : undefined;
      if (!converted) {
        if (required.has(name)) {
          throw new Error(`${path}.${name} is required but cannot be expressed in strict mode`);
        }
        continue; // optional and inexpressible: left out (the server reads absent as not given)
      }
      properties[name] = required.has(name) ? converted : nullable(converted);
    }
    out.type ??= 'object';
    out.properties = properties;
    out.required = Object.keys(properties);
    out.additionalProperties = false;
  }
  return out;
}

/** A tool's input schema in the form OpenAI's strict function calling accepts. */
export function toOpenAiStrictSchema(schema: JsonSchema): JsonSchema {
  const strict = strictNode(schema, '(root)');
  if (strict?.type !== 'object' || strict.anyOf !== undefined) {
    throw new Error('a strict function schema must be an object at the root');
  }
  return strict;
}

/** Strict mode requires every field: tells the model how to leave one out. */
export const OPENAI_NULL_HINT = 'Every field is required here: pass null for each one you would leave out.';

export function toOpenAiTool(definition: ToolDefinition): OpenAiTool {
  return {
    type: 'function',
    function: {
      name: definition.name,
      description: `${definition.description} ${OPENAI_NULL_HINT}`,
      parameters: toOpenAiStrictSchema(definition.input_schema),
      strict: true,
    },
  };
}

export function toOpenAiResponsesTool(definition: ToolDefinition): OpenAiResponsesTool {
  const { function: fn } = toOpenAiTool(definition);
  return { type: 'function', name: fn.name, description: fn.description, parameters: fn.parameters, strict: true };
}

export function toAnthropicTool(definition: ToolDefinition): AnthropicTool {
  return { name: definition.name, description: definition.description, input_schema: definition.input_schema };
}

/** The tool definitions in `format`. */
export function toolsInFormat(
  format: ToolFormat,
  definitions: readonly ToolDefinition[] = toolDefinitions(),
): ToolDefinition[] | OpenAiTool[] | OpenAiResponsesTool[] | AnthropicTool[] {
  switch (format) {
    case 'openai':
      return definitions.map(toOpenAiTool);
    case 'openai-responses':
      return definitions.map(toOpenAiResponsesTool);
    case 'anthropic':
      return definitions.map(toAnthropicTool);
    default:
      return [...definitions];
  }
}

const FormatQuery = z.object({
  format: z.enum(TOOL_FORMATS, { error: `must be one of: ${TOOL_FORMATS.join(', ')}` }).default('opspad'),
});

/** The `format` query parameter (default `opspad`); a 400 naming `format` when unknown. */
export function toolFormatOf(query: unknown): ToolFormat {
  return parseOrThrow(FormatQuery, query ?? {}, 'query').format;
}
