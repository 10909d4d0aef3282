/**
 * The tools opspad offers a model, by name, with one `execute` entry point.
 */
import { AppError } from '../domain/errors.ts';
import { normalizeFlatInput } from './flat-input.ts';
import { executeReadFromScratchpad, executeWriteToScratchpad, READ_TOOL_NAME, WRITE_TOOL_NAME } from './notes-tools.ts';
import {
  executeOperationTool,
  OPERATION_TOOL_NAME,
  type OperationToolDeps,
  type ToolCallContext,
  type ToolResult,
} from './operation-tool.ts';
import { executeUpdateScratchpad, type ScratchpadToolDeps, UPDATE_SCRATCHPAD_TOOL } from './scratchpad-tool.ts';

export interface ToolRegistry {
  readonly names: readonly string[];
  execute(name: string, input: unknown, ctx: ToolCallContext): Promise<ToolResult>;
}

export function createToolRegistry(deps: OperationToolDeps & ScratchpadToolDeps): ToolRegistry {
  const tools: Record<string, (input: unknown, ctx: ToolCallContext) => Promise<ToolResult>> = {
    [OPERATION_TOOL_NAME]: (input, ctx) => executeOperationTool(deps, ctx, normalizeFlatInput(input)),
    [WRITE_TOOL_NAME]: (input, ctx) => executeWriteToScratchpad(deps.db, ctx, input, deps.sizeLimits?.noteBytes),
    [READ_TOOL_NAME]: (input, ctx) => executeReadFromScratchpad(deps.db, ctx, input, deps.sizeLimits?.noteBytes),
    [UPDATE_SCRATCHPAD_TOOL]: (input, ctx) => executeUpdateScratchpad(deps, ctx, input),
  };
  const names = Object.keys(tools);
  return {
    names,
    execute(name, input, ctx) {
      const tool = Object.hasOwn(tools, name) ? tools[name] : undefined;
      if (!tool) {
        throw new AppError('unknown_tool', `There is no tool "${name}". Tools: ${names.join(', ')}.`, {
          field: 'toolName',
          tools: names,
        });
      }
      return tool(input, ctx);
    },
  };
}
