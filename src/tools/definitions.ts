/**
 * Tool definitions for function calling, generated from the same zod schemas that validate the
 * calls. A discriminated union becomes one flat object schema (models and vendors want an object
 * at the root): `action` is an enum, and every other property says which actions use it.
 */
import { z } from 'zod';
import { OPERATION_ACTIONS, OperationToolInput } from '../domain/operation-input.ts';
import { OPERATION_TOOL_NAME } from './operation-tool.ts';

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
  ];
}
