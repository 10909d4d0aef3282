/**
 * Tool definitions for function calling, generated from the same zod schemas that validate the
 * calls. A discriminated union becomes one flat object schema (models and vendors want an object
 * at the root): `action` is an enum, every other property says which actions use and require
 * it, and an if/then/else chain at the root enforces it. Optional fields carry no null branch.
 */
import { z } from 'zod';
import {
  READ_TOOL_NAME,
  ReadFromScratchpadInput,
  WRITE_TOOL_NAME,
  WriteToScratchpadInput,
} from '../domain/notes-input.ts';
import { OPERATION_ACTIONS, OperationToolInput } from '../domain/operation-input.ts';
import { UpdateScratchpadInput } from '../domain/scratchpad-input.ts';
import { OPERATION_TOOL_NAME } from './operation-tool.ts';
import { UPDATE_SCRATCHPAD_TOOL } from './scratchpad-tool.ts';

export type JsonSchema = { [key: string]: unknown };

export interface ToolDefinition {
  name: string;
  description: string;
  input_schema: JsonSchema;
}

const OPERATION_TOOL_DESCRIPTION = [
  'Durable working memory for bulk work (more than 5 items). It remembers every item id, what is done, what failed and where to resume, even after earlier messages leave your context.',
  'Flow: "create" with every item id → "progress" returns the next batch → process it → "update" with completed_ids and failed [{id, reason}] → repeat until progress says every item is recorded → "complete".',
  'Only one operation is active per conversation: create and resume pause the active one. "pause", "resume", "cancel", "get" (counts and failure reasons) and "retry_failed" (a new operation over the failed ids) manage it.',
  'Your open operations, with their ids and the exact call to continue each, are in your context every turn (the system prompt, or the read_working_memory tool where it is offered).',
].join(' ');

const WRITE_TOOL_DESCRIPTION = [
  'Add a note to your notes: a log for this task. Write down your plan, each important finding after a tool call, decisions and what is left to do.',
  'Notes are not in your working memory (read_working_memory, the context): read them back with read_from_scratchpad. What must stay in view every turn belongs in update_scratchpad.',
  'Notes are kept in write order; with return_history true the answer shows the whole scratchpad.',
  'Notes of an execution are cleared when it ends.',
].join(' ');

const READ_TOOL_DESCRIPTION = [
  'Read every note of your scratchpad, persistent notes first. Check it before starting a task or a new step, to reuse what you already found.',
  'persistent_notes (optional) are standing instructions kept for the whole conversation, stored once and shown in every read.',
  'A long scratchpad comes in pages: the answer then ends with the call for the next page (after).',
  'Answers "Scratchpad is empty." when there is nothing.',
].join(' ');

const UPDATE_SCRATCHPAD_DESCRIPTION = [
  'Keep your structured working memory: goals, open items, facts and the sources (refs) they come from. The system prompt recites it every turn, so it survives when earlier messages leave your context.',
  'add entries as you learn them, remove open items when done (by exact text), replace a section to rewrite it.',
  'Every fact cites a ref by id (source_ref): "user:initial" (the task), "operation:<operation_id>", "item:<operation_id>:<item_id>", or a ref you add (e.g. {"id":"crm:search-1","kind":"tool_call","label":"contacts tagged Lead"}).',
  'Pass expected_version (shown in the recitation) to avoid overwriting a change you have not seen.',
].join(' ');

/**
 * `schema` without the null branches zod writes for `.nullish()`: optional fields are simply not
 * required. Clients that read a property's top-level `type` (the MCP Inspector CLI converts
 * `--tool-arg` values by it) see `integer`, not an `anyOf`; the API still reads null as "not
 * given", for strict-mode callers (see formats.ts).
 */
export function withoutNullBranches(schema: JsonSchema): JsonSchema {
  let node: JsonSchema = schema;
  if (Array.isArray(node.anyOf)) {
    const branches = (node.anyOf as JsonSchema[]).filter((branch) => branch.type !== 'null');
    const { anyOf: _anyOf, ...wrapper } = node;
    if (branches.length === 1) {
      // The wrapper's description and default describe the field; the branch its type.
      const [only] = branches as [JsonSchema];
      node = { ...only, ...wrapper };
    } else {
      node = { ...wrapper, anyOf: branches };
    }
  }
  if (Array.isArray(node.type)) {
    const types = (node.type as unknown[]).filter((type) => type !== 'null');
    node = { ...node, type: types.length === 1 ? types[0] : types };
  }
  const out: JsonSchema = {};
  for (const [key, value] of Object.entries(node)) {
    if (key === 'properties' && isRecord(value)) {
      out.properties = Object.fromEntries(
        Object.entries(value).map(([name, property]) => [name, withoutNullBranches(property as JsonSchema)]),
      );
    } else if ((key === 'items' || key === 'additionalProperties') && isRecord(value)) {
      out[key] = withoutNullBranches(value);
    } else if (key === 'anyOf' && Array.isArray(value)) {
      out.anyOf = (value as JsonSchema[]).map(withoutNullBranches);
    } else {
      out[key] = value;
    }
  }
  return out;
}

function isRecord(value: unknown): value is JsonSchema {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** A strict zod object as a JSON Schema object (`additionalProperties: false`), without null branches. */
function objectSchema(schema: z.ZodObject): JsonSchema {
  const { $schema: _dialect, ...json } = z.toJSONSchema(schema, { io: 'input' }) as JsonSchema;
  return withoutNullBranches(json);
}

/** The notes scratchpad tools (write, read): `write_to_scratchpad` and `read_from_scratchpad`. */
export function notesToolDefinitions(): ToolDefinition[] {
  return [
    { name: WRITE_TOOL_NAME, description: WRITE_TOOL_DESCRIPTION, input_schema: objectSchema(WriteToScratchpadInput) },
    { name: READ_TOOL_NAME, description: READ_TOOL_DESCRIPTION, input_schema: objectSchema(ReadFromScratchpadInput) },
  ];
}

/** Which fields an action takes, and which of them it cannot do without. */
export interface ActionRule {
  action: string;
  required: string[];
  fields: string[];
}

/** Descriptions of the flat schema that no single action's schema can give. */
const FLAT_DESCRIPTIONS: Record<string, string> = {
  operation_id:
    'The operation’s id: returned by create, shown in the context with the call to continue it. Where it is optional and omitted, the conversation’s active operation is used.',
};

/** "Required for update, complete; optional for progress." and the like. */
function usage(uses: readonly { action: string; required: boolean }[]): string {
  const required = uses.filter((use) => use.required).map((use) => use.action);
  const optional = uses.filter((use) => !use.required).map((use) => use.action);
  if (required.length > 0 && optional.length > 0) {
    return `Required for ${required.join(', ')}; optional for ${optional.join(', ')}.`;
  }
  return required.length > 0 ? `Required for ${required.join(', ')}.` : `For ${optional.join(', ')}.`;
}

/**
 * The per-action rules as a chain of `if`/`then`/`else` at the root: Anthropic's API refuses
 * `anyOf`, `oneOf` and `allOf` at the top of an input schema (and so do clients that pass MCP
 * schemas on to it), not `if`. Each `then` requires the action's fields and allows no other.
 */
function ruleChain(rules: readonly ActionRule[]): JsonSchema {
  const thenOf = (rule: ActionRule): JsonSchema => ({
    ...(rule.required.length > 0 ? { required: rule.required } : {}),
    propertyNames: { enum: ['action', ...rule.fields] },
  });
  const [first, ...rest] = rules;
  if (!first) {
    return {};
  }
  if (rest.length === 0) {
    return thenOf(first);
  }
  return {
    if: { properties: { action: { const: first.action } } },
    // biome-ignore lint/suspicious/noThenProperty: JSON Schema's keyword, never awaited.
    then: thenOf(first),
    else: ruleChain(rest),
  };
}

/** Each action of the operation tool: its fields, required first. */
export function operationActionRules(): ActionRule[] {
  return OperationToolInput.options.map((variant) => {
    const schema = z.toJSONSchema(variant, { io: 'input' }) as { properties: JsonSchema; required?: string[] };
    return {
      action: variant.shape.action.value,
      required: (schema.required ?? []).filter((name) => name !== 'action'),
      fields: Object.keys(schema.properties).filter((name) => name !== 'action'),
    };
  });
}

function actionDescription(rules: readonly ActionRule[]): string {
  const each = rules.map((rule) =>
    rule.required.length > 0 ? `${rule.action} (needs ${rule.required.join(', ')})` : rule.action,
  );
  return `What to do: ${each.join(', ')}. Send only the fields of the chosen action.`;
}

/**
 * The operation tool's union as one flat object (function-calling APIs want an object at the
 * root): `action` is an enum, every property says which actions use it and which require it,
 * and the root's if/then/else chain enforces the same where a validator reads it.
 */
function flattenUnion(variants: readonly z.ZodObject[]): JsonSchema {
  const properties: Record<string, JsonSchema> = {};
  const uses = new Map<string, { action: string; required: boolean }[]>();
  for (const variant of variants) {
    const schema = z.toJSONSchema(variant, { io: 'input' }) as { properties: JsonSchema; required?: string[] };
    const action = String((schema.properties.action as { const?: unknown }).const);
    for (const [name, property] of Object.entries(schema.properties)) {
      if (name === 'action') {
        continue;
      }
      properties[name] ??= withoutNullBranches(property as JsonSchema);
      uses.set(name, [...(uses.get(name) ?? []), { action, required: (schema.required ?? []).includes(name) }]);
    }
  }
  for (const [name, fieldUses] of uses) {
    const property = properties[name] as JsonSchema;
    const own = FLAT_DESCRIPTIONS[name] ?? (typeof property.description === 'string' ? property.description : '');
    property.description = `${own ? `${own} ` : ''}${usage(fieldUses)}`;
  }
  const rules = operationActionRules();
  return {
    type: 'object',
    properties: {
      action: { type: 'string', enum: [...OPERATION_ACTIONS], description: actionDescription(rules) },
      ...properties,
    },
    required: ['action'],
    additionalProperties: false,
    ...ruleChain(rules),
  };
}

export function toolDefinitions(): ToolDefinition[] {
  return [
    {
      name: OPERATION_TOOL_NAME,
      description: OPERATION_TOOL_DESCRIPTION,
      input_schema: flattenUnion(OperationToolInput.options),
    },
    ...notesToolDefinitions(),
    {
      name: UPDATE_SCRATCHPAD_TOOL,
      description: UPDATE_SCRATCHPAD_DESCRIPTION,
      input_schema: objectSchema(UpdateScratchpadInput),
    },
  ];
}
