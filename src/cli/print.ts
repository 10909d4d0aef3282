/** `opspad tools print` and `opspad openapi print`: documents built here, reading no setting. */
import { openApiDocument } from '../api/openapi/document.ts';
import { isToolFormat, TOOL_FORMATS, toolsInFormat } from '../tools/formats.ts';
import { UsageError } from './failure.ts';

/** The tool definitions in a vendor's format. */
export async function printTools(format: string): Promise<number> {
  if (!isToolFormat(format)) {
    throw new UsageError(`--format "${format}" is not a format opspad knows`, `Use one of: ${TOOL_FORMATS.join(', ')}`);
  }
  process.stdout.write(`${JSON.stringify({ tools: toolsInFormat(format) }, null, 2)}\n`);
  return 0;
}

export async function printOpenApi(): Promise<number> {
  process.stdout.write(`${JSON.stringify(openApiDocument(), null, 2)}\n`);
  return 0;
}
