/**
 * The MCP Inspector's CLI, a client nobody here wrote, drives `opspad mcp` through the seed's
 * flow: create → progress → update → progress → update → complete. On Node 20, `npx
 * @modelcontextprotocol/inspector` resolves to 0.15, whose `--cli` mode is this package's
 * `mcp-inspector-cli`: it converts each `--tool-arg key=value` by the property's top-level
 * `type` (integer → number, array → JSON), so a schema that wrapped `batch_size` in an
 * `anyOf [integer, null]` would send "2" as a string, which opspad refuses. Every invocation
 * starts a new `opspad mcp` without --conversation: the calls after create reach the operation
 * through its id alone.
 */
import { execFile } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, startHarness, type Tenant } from '../helpers/harness.ts';

const BIN = fileURLToPath(new URL('../../bin/opspad.js', import.meta.url));
const require = createRequire(import.meta.url);
const INSPECTOR_PACKAGE = require.resolve('@modelcontextprotocol/inspector-cli/package.json');
const { version: INSPECTOR_VERSION, bin } = require(INSPECTOR_PACKAGE) as {
  version: string;
  bin: Record<string, string>;
};
const INSPECTOR = join(dirname(INSPECTOR_PACKAGE), bin['mcp-inspector-cli'] as string);
const run = promisify(execFile);

describe('the MCP Inspector CLI against opspad mcp', () => {
  let harness: Harness;
  let tenant: Tenant;

  beforeAll(async () => {
    harness = await startHarness('pglite');
    tenant = await harness.newTenant();
  });
  afterAll(async () => {
    await harness.close();
  });

  /** One Inspector invocation: `--cli`, opspad's URL and key as -e, then opspad mcp and the method. */
  async function inspect(method: string, toolArgs: string[] = []): Promise<Record<string, unknown>> {
    const args = [
      INSPECTOR,
      '--cli',
      '-e',
      `OPSPAD_URL=${harness.url}`,
      '-e',
      `OPSPAD_API_KEY=${tenant.apiKey}`,
      process.execPath,
      BIN,
      'mcp',
      '--method',
      method,
      ...(method === 'tools/call' ? ['--tool-name', 'manage_assistant_operation', '--tool-arg', ...toolArgs] : []),
    ];
    const { stdout } = await run(process.execPath, args, { timeout: 60_000 });
    return JSON.parse(stdout) as Record<string, unknown>;
  }

  async function call(...toolArgs: string[]): Promise<Record<string, unknown>> {
    const result = (await inspect('tools/call', toolArgs)) as {
      isError?: boolean;
      content: { type: string; text: string }[];
    };
    const body = JSON.parse(result.content[0]?.text ?? '{}') as Record<string, unknown>;
    expect(result.isError, JSON.stringify(body)).toBeFalsy();
    return body;
  }

  it('is the version Node 20 resolves (0.15), and lists the tools with plain top-level types', async () => {
    expect(INSPECTOR_VERSION).toMatch(/^0\.15\./);
    const listed = (await inspect('tools/list')) as { tools: { name: string; inputSchema: { properties: object } }[] };
    const operation = listed.tools.find((tool) => tool.name === 'manage_assistant_operation');
    expect(operation?.inputSchema.properties).toMatchObject({
      batch_size: { type: 'integer' },
      total_items: { type: 'integer' },
      item_ids: { type: 'array' },
    });
    expect(listed.tools.map((tool) => tool.name)).toContain('read_working_memory');
  });

  it('runs the seed flow: create, progress, update, progress, update, complete', async () => {
    const created = await call(
      'action=create',
      'operation_type=send_sms',
      'total_items=3',
      'item_ids=["c1","c2","c3"]',
      'batch_size=2',
    );
    expect(created).toMatchObject({ status: 'active', total_items: 3, batch_size: 2 });
    const operationId = created.operation_id as string;

    const first = await call('action=progress', `operation_id=${operationId}`);
    expect(first).toMatchObject({ operation_id: operationId, batch: ['c1', 'c2'], remaining_count: 3 });
    const recorded = await call(
      'action=update',
      `operation_id=${operationId}`,
      'completed_ids=["c1"]',
      'failed=[{"id":"c2","reason":"no phone number"}]',
    );
    expect(recorded).toMatchObject({ completed_count: 1, failed_count: 1, remaining_count: 1 });

    const second = await call('action=progress', `operation_id=${operationId}`);
    expect(second).toMatchObject({ batch: ['c3'] });
    await call('action=update', `operation_id=${operationId}`, 'completed_ids=["c3"]');

    const completed = await call('action=complete', `operation_id=${operationId}`, 'force=false');
    expect(completed).toMatchObject({ status: 'completed', completed_count: 2, failed_count: 1 });
    const rows = await harness.db.query<{ status: string }>('SELECT status FROM assistant_operation WHERE id = $1', [
      operationId,
    ]);
    expect(rows).toEqual([{ status: 'completed' }]);
  }, 300_000);
});
