/**
 * The tool definitions served by GET /v1/tools: one tool, `manage_assistant_operation`, whose
 * input schema is a flat object (what function-calling APIs accept at the root) with an `action`
 * enum of every action, every field of every action, and no other properties. OPERATION_ACTIONS
 * is checked against the zod union, at the type level and at run time.
 */
import { describe, expect, expectTypeOf, it } from 'vitest';
import type { z } from 'zod';
import { OPERATION_ACTIONS, OperationToolInput } from '../domain/operation-input.ts';
import { toolDefinitions } from './definitions.ts';
import { OPERATION_TOOL_NAME } from './operation-tool.ts';

interface PropertySchema {
  description?: string;
  enum?: string[];
  type?: string;
}

function operationTool() {
  const definitions = toolDefinitions();
  expect(definitions).toHaveLength(1);
  const [tool] = definitions;
  if (!tool) {
    throw new Error('no tool definition');
  }
  return tool;
}

describe('toolDefinitions', () => {
  it('offers exactly one tool, manage_assistant_operation, with a description', () => {
    const tool = operationTool();
    expect(tool.name).toBe('manage_assistant_operation');
    expect(tool.name).toBe(OPERATION_TOOL_NAME);
    expect(tool.description.length).toBeGreaterThan(100);
    expect(Object.keys(tool).sort()).toEqual(['description', 'input_schema', 'name']);
  });

  it('has an object at the root that requires only action and allows nothing else', () => {
    const schema = operationTool().input_schema;
    expect(schema.type).toBe('object');
    expect(schema.required).toEqual(['action']);
    expect(schema.additionalProperties).toBe(false);
    expect(schema).not.toHaveProperty('anyOf');
    expect(schema).not.toHaveProperty('oneOf');
  });

  it('lists all 9 actions in the action enum', () => {
    const properties = operationTool().input_schema.properties as Record<string, PropertySchema>;
    expect(properties.action).toMatchObject({ type: 'string', enum: [...OPERATION_ACTIONS] });
    expect(properties.action?.enum).toHaveLength(9);
    expect(new Set(properties.action?.enum)).toEqual(
      new Set(['create', 'progress', 'update', 'complete', 'resume', 'pause', 'cancel', 'get', 'retry_failed']),
    );
  });

  it('has every field of every action, each saying which actions use it', () => {
    const properties = operationTool().input_schema.properties as Record<string, PropertySchema>;
    const fieldsByAction = new Map(
      OperationToolInput.options.map((variant) => [variant.shape.action.value, Object.keys(variant.shape)]),
    );
    const allFields = new Set([...fieldsByAction.values()].flat());
    expect(new Set(Object.keys(properties))).toEqual(allFields);
    for (const [action, fields] of fieldsByAction) {
      for (const field of fields.filter((f) => f !== 'action')) {
        expect(properties[field]?.description, `${field} used by ${action}`).toMatch(
          new RegExp(`\\((?:[a-z_]+, )*${action}(?:, [a-z_]+)*\\)$`),
        );
      }
    }
  });

  it('publishes defaults and item id limits from the zod schemas', () => {
    const properties = operationTool().input_schema.properties as Record<string, Record<string, unknown>>;
    expect(JSON.stringify(properties.batch_size)).toContain('"default":5');
    expect(JSON.stringify(properties.item_ids)).toContain('"maxLength":512');
  });

  it('is plain JSON (what GET /v1/tools sends)', () => {
    const definitions = toolDefinitions();
    expect(JSON.parse(JSON.stringify({ tools: definitions }))).toEqual({ tools: definitions });
  });
});

describe('OPERATION_ACTIONS', () => {
  it('matches the action literals of the input union, in type and in value', () => {
    expectTypeOf<(typeof OPERATION_ACTIONS)[number]>().toEqualTypeOf<OperationToolInput['action']>();
    expectTypeOf<z.input<typeof OperationToolInput>['action']>().toEqualTypeOf<(typeof OPERATION_ACTIONS)[number]>();
    expect(OperationToolInput.options.map((variant) => variant.shape.action.value)).toEqual([...OPERATION_ACTIONS]);
  });
});
