/**
 * The formats besides the OpenAI Chat Completions one: opspad's own (what `opspad mcp` serves)
 * and Anthropic's carry the definitions as generated, with no null branch and no combinator at
 * the root; the Responses API's is the strict function without its wrapper; `format` is checked.
 */
import { describe, expect, it } from 'vitest';
import { AppError } from '../domain/errors.ts';
import { type JsonSchema, toolDefinitions } from './definitions.ts';
import { type OpenAiTool, toAnthropicTool, toOpenAiResponsesTool, toolFormatOf, toolsInFormat } from './formats.ts';

const definitions = toolDefinitions();
const openAiTools = toolsInFormat('openai') as OpenAiTool[];

describe('the Anthropic and opspad formats', () => {
  it('anthropic: {name, description, input_schema} with the schema as generated', () => {
    const tools = toolsInFormat('anthropic');
    expect(tools).toEqual(definitions.map(toAnthropicTool));
    for (const [i, tool] of tools.entries()) {
      expect(tool).toEqual({
        name: definitions[i]?.name,
        description: definitions[i]?.description,
        input_schema: definitions[i]?.input_schema,
      });
    }
  });

  it('opspad is the definitions themselves', () => {
    expect(toolsInFormat('opspad')).toEqual(definitions);
  });

  it('openai-responses: the strict function without the Chat Completions wrapper', () => {
    const tools = toolsInFormat('openai-responses');
    expect(tools).toEqual(definitions.map(toOpenAiResponsesTool));
    for (const [i, tool] of tools.entries()) {
      const chat = openAiTools[i]?.function;
      expect(tool).toEqual({
        type: 'function',
        name: chat?.name,
        description: chat?.description,
        parameters: chat?.parameters,
        strict: true,
      });
    }
  });

  it('no format carries a null branch outside the OpenAI ones, nor anyOf/oneOf/allOf at the root', () => {
    for (const format of ['opspad', 'anthropic'] as const) {
      for (const tool of toolsInFormat(format) as { input_schema: JsonSchema }[]) {
        const json = JSON.stringify(tool.input_schema);
        expect(json).not.toContain('"null"');
        for (const key of ['anyOf', 'oneOf', 'allOf']) {
          expect(tool.input_schema).not.toHaveProperty(key);
        }
      }
    }
  });
});

describe('toolFormatOf', () => {
  it('defaults to opspad and accepts each format', () => {
    expect(toolFormatOf({})).toBe('opspad');
    expect(toolFormatOf(undefined)).toBe('opspad');
    expect(toolFormatOf({ format: 'openai' })).toBe('openai');
    expect(toolFormatOf({ format: 'anthropic', other: 'ignored' })).toBe('anthropic');
  });

  it('refuses an unknown format with a validation error naming format', () => {
    let error: unknown;
    try {
      toolFormatOf({ format: 'gemini' });
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(AppError);
    expect(error).toMatchObject({ code: 'validation_failed', details: { issues: [{ field: 'format' }] } });
    expect((error as Error).message).toContain('format: must be one of: opspad, openai, openai-responses, anthropic');
  });
});
