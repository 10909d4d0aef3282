/**
 * The tool definitions served by GET /v1/tools. `manage_assistant_operation` comes first; its
 * input schema is a flat object (what function-calling APIs accept at the root) with an `action`
 * enum of every action, every field of every action, and no other properties. OPERATION_ACTIONS
 * is checked against the zod union, at the type level and at run time. The notes scratchpad
 * tools (`write_to_scratchpad`, `read_from_scratchpad`) are strict objects from their zod schemas.
 */
import { describe, expect, expectTypeOf, it } from 'vitest';
import type { z } from 'zod';
import { MAX_NOTE_LENGTH, READ_TOOL_NAME, WRITE_TOOL_NAME } from '../domain/notes-input.ts';
import { OPERATION_ACTIONS, OperationToolInput } from '../domain/operation-input.ts';
import { toolDefinitions } from './definitions.ts';
import { OPERATION_TOOL_NAME } from './operation-tool.ts';

interface PropertySchema {
  description?: string;
  enum?: string[];
  type?: string;
}

function definitionOf(name: string) {
  const tool = toolDefinitions().find((definition) => definition.name === name);
  if (!tool) {
    throw new Error(`no tool definition for ${name}`);
  }
  return tool;
}

function operationTool() {
  return definitionOf(OPERATION_TOOL_NAME);
}

describe('toolDefinitions', () => {
  it('offers manage_assistant_operation first, with a description, and each tool once', () => {
    const names = toolDefinitions().map((definition) => definition.name);
    expect(names[0]).toBe('manage_assistant_operation');
    expect(new Set(names).size).toBe(names.length);
    const tool = operationTool();
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

  it('has every field of every action, each saying which actions use it and which require it', () => {
    const properties = operationTool().input_schema.properties as Record<string, PropertySchema>;
    const fieldsByAction = new Map(
      OperationToolInput.options.map((variant) => [variant.shape.action.value, Object.keys(variant.shape)]),
    );
    const allFields = new Set([...fieldsByAction.values()].flat());
    expect(new Set(Object.keys(properties))).toEqual(allFields);
    for (const [action, fields] of fieldsByAction) {
      for (const field of fields.filter((f) => f !== 'action')) {
        expect(properties[field]?.description, `${field} used by ${action}`).toMatch(
          new RegExp(`(Required for|optional for|For) (?:[a-z_]+, )*${action}(?:, [a-z_]+)*[.;]`),
        );
      }
    }
    expect(properties.operation_id?.description).toMatch(
      /Required for update, complete, resume, cancel, retry_failed; optional for progress, pause, get\.$/,
    );
    expect(properties.item_ids?.description).toMatch(/Required for create\.$/);
    expect(properties.batch_size?.description).toMatch(/For create, retry_failed\.$/);
  });

  it('enforces each action’s required and allowed fields with an if/then/else chain at the root', () => {
    const schema = operationTool().input_schema as Record<string, unknown>;
    const rules: [string, unknown][] = [];
    let node: Record<string, unknown> | undefined = schema;
    while (node?.if) {
      const action = (node.if as { properties: { action: { const: string } } }).properties.action.const;
      rules.push([action, node.then]);
      node = node.else as Record<string, unknown> | undefined;
    }
    rules.push(['retry_failed', node]);
    expect(rules.map(([action]) => action)).toEqual([...OPERATION_ACTIONS]);
    expect(Object.fromEntries(rules)).toMatchObject({
      create: {
        required: ['operation_type', 'total_items', 'item_ids'],
        propertyNames: { enum: expect.arrayContaining(['action', 'query_params', 'max_failure_rate']) },
      },
      progress: { propertyNames: { enum: ['action', 'operation_id', 'lease_owner', 'lease_seconds'] } },
      update: { required: ['operation_id'] },
      resume: { required: ['operation_id'], propertyNames: { enum: ['action', 'operation_id'] } },
      retry_failed: { required: ['operation_id'], propertyNames: { enum: ['action', 'operation_id', 'batch_size'] } },
    });
    expect(rules[1]?.[1]).not.toHaveProperty('required'); // progress needs no id
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

describe('notes scratchpad tool definitions', () => {
  it('offers write_to_scratchpad: notes required (1..20000 chars), return_history and its alias optional', () => {
    const tool = definitionOf(WRITE_TOOL_NAME);
    expect(tool.name).toBe('write_to_scratchpad');
    expect(tool.description).toMatch(/scratchpad/);
    expect(tool.input_schema).not.toHaveProperty('$schema');
    expect(tool.input_schema).toMatchObject({ type: 'object', required: ['notes'], additionalProperties: false });
    const properties = tool.input_schema.properties as Record<string, Record<string, unknown>>;
    // Every name the tool accepts is in its schema: include_history is the reference's alias.
    expect(Object.keys(properties).sort()).toEqual(['include_history', 'notes', 'return_history']);
    expect(properties.notes).toMatchObject({ type: 'string', minLength: 1, maxLength: MAX_NOTE_LENGTH });
    expect(properties.return_history).toMatchObject({ type: 'boolean', default: false });
    expect(properties.include_history).toMatchObject({ type: 'boolean', default: false });
    expect(properties.include_history?.description).toContain('Alias of return_history');
    for (const property of Object.values(properties)) {
      expect(typeof property.description).toBe('string');
    }
  });

  it('offers read_from_scratchpad: an optional persistent_notes string and page cursor, nothing else', () => {
    const tool = definitionOf(READ_TOOL_NAME);
    expect(tool.name).toBe('read_from_scratchpad');
    expect(tool.description).toContain('Scratchpad is empty.');
    expect(tool.input_schema).toMatchObject({ type: 'object', additionalProperties: false });
    expect(tool.input_schema).not.toHaveProperty('required');
    const properties = tool.input_schema.properties as Record<string, Record<string, unknown>>;
    expect(Object.keys(properties)).toEqual(['persistent_notes', 'after']);
    expect(properties.after).toMatchObject({ type: 'integer', minimum: 0 });
    expect(JSON.stringify(properties.persistent_notes)).toContain(`"maxLength":${MAX_NOTE_LENGTH}`);
    expect(typeof properties.persistent_notes?.description).toBe('string');
  });
});

describe('update_scratchpad', () => {
  it('offers add, remove and replace of pad sections, a version guard, and a fact shape that requires a source', () => {
    const tool = toolDefinitions().find((definition) => definition.name === 'update_scratchpad');
    expect(tool?.description).toContain('source_ref');
    expect(tool?.input_schema).toMatchObject({ type: 'object', additionalProperties: false });
    const properties = tool?.input_schema.properties as Record<string, unknown>;
    expect(Object.keys(properties).sort()).toEqual(['add', 'expected_version', 'reason', 'remove', 'replace', 'task']);
    expect(JSON.stringify(properties.add)).toMatch(/"required":\["text","source_ref"\]/);
  });
});

describe('OPERATION_ACTIONS', () => {
  it('matches the action literals of the input union, in type and in value', () => {
    expectTypeOf<(typeof OPERATION_ACTIONS)[number]>().toEqualTypeOf<OperationToolInput['action']>();
    expectTypeOf<z.input<typeof OperationToolInput>['action']>().toEqualTypeOf<(typeof OPERATION_ACTIONS)[number]>();
    expect(OperationToolInput.options.map((variant) => variant.shape.action.value)).toEqual([...OPERATION_ACTIONS]);
  });
});
