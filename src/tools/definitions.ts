/**
 * Tool definitions for function calling, generated from the same zod schemas that validate the
 * calls. A discriminated union becomes one flat object schema (models and vendors want an object
 * at the root): `action` is an enum, and every other property says which actions use it.
 */
import { z } from 'zod';
import {
  READ_TOOL_NAME,
  ReadFromScratchpadInput,
  WRITE_TOOL_NAME,
  WriteToScratchpadSchema,
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
  'The system prompt shows the active and paused operations every turn; use their ids to continue.',
].join(' ');

const WRITE_TOOL_DESCRIPTION = [
  'Add a note to your scratchpad: your working memory for this task. Write down your plan, each important finding after a tool call, decisions and what is left to do, so you do not lose them.',
  'Notes are kept in write order; with return_history true the answer shows the whole scratchpad.',
  'Notes of an execution are cleared when it ends.',
].join(' ');

const READ_TOOL_DESCRIPTION = [
  'Read every note of your scratchpad, persistent notes first. Check it before starting a task or a new step, to reuse what you already found.',
  'persistent_notes (optional) are standing instructions kept for the whole conversation, stored once and shown in every read.',
  'Answers "Scratchpad is empty." when there is nothing.',
].join(' ');

const UPDATE_SCRATCHPAD_DESCRIPTION = [
  'Keep your structured working memory: goals, open items, facts and the sources (refs) they come from. The system prompt recites it every turn, so it survives when earlier messages leave your context.',
  'add entries as you learn them, remove open items when done (by exact text), replace a section to rewrite it.',
  'Every fact cites a ref by id (source_ref): "user:initial" (the task), "operation:<operation_id>", "item:<operation_id>:<item_id>", or a ref you add (e.g. {"id":"crm:search-1","kind":"tool_call","label":"contacts tagged Lead"}).',
  'Pass expected_version (shown in the recitation) to avoid overwriting a change you have not seen.',
].join(' ');

/** A strict zod object as a JSON Schema object (`additionalProperties: false`). */
function objectSchema(schema: z.ZodObject): JsonSchema {
  const { $schema: _dialect, ...json } = z.toJSONSchema(schema, { io: 'input' }) as JsonSchema;
  return json;
}

/** The notes scratchpad tools (write, read): `write_to_scratchpad` and `read_from_scratchpad`. */
export function notesToolDefinitions(): ToolDefinition[] {
  return [
    { name: WRITE_TOOL_NAME, description: WRITE_TOOL_DESCRIPTION, input_schema: objectSchema(WriteToScratchpadSchema) },
    { name: READ_TOOL_NAME, description: READ_TOOL_DESCRIPTION, input_schema: objectSchema(ReadFromScratchpadInput) },
  ];
}

function flattenUnion(variants: readonly z.ZodObject[]): JsonSchema {
  const properties: Record<string, JsonSchema> = {};
  const usedBy = new Map<string, string[]>();
  for (const variant of variants) {
    const schema = z.toJSONSchema(variant, { io: 'input' }) as {
      properties: Record<string, JsonSchema>;
    };
    const action = String((schema.properties.action as { const?: unknown }).const);
    for (const [name, property] of Object.entries(schema.properties)) {
      if (name === 'action') {
        continue;
      }
      properties[name] ??= property;
      usedBy.set(name, [...(usedBy.get(name) ?? []), action]);
    }
  }
  for (const [name, actions] of usedBy) {
    const property = properties[name] as JsonSchema;
    const described = typeof property.description === 'string' ? `${property.description} ` : '';
    property.description = `${described}(${actions.join(', ')})`;
  }
  return {
    type: 'object',
    properties: {
      action: { type: 'string', enum: [...OPERATION_ACTIONS], description: 'What to do.' },
      ...properties,
    },
    required: ['action'],
    additionalProperties: false,
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
