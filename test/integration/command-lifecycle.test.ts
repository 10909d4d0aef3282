/**
 * How the other long-running commands end. `opspad mcp` with a tool call that opspad never
 * answers: its session ends — and the process with it, within a second — when the client closes
 * stdin, when it goes away from stdout (EPIPE), or on SIGTERM. `opspad demo` stopped by SIGTERM
 * mid-run: it stops the opspad it started within the shutdown bound, leaving no item leased.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { LATEST_PROTOCOL_VERSION } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { createPostgresDatabase, type OpspadDatabase } from '../../src/store/index.ts';
import { type Harness, harnessPrefix, startHarness, type Tenant } from '../helpers/harness.ts';
import { type PrivateDatabase, privatePostgresDatabase } from '../helpers/private-database.ts';
import { type Exit, killAllChildren, spawnOpspad, within } from '../helpers/processes.ts';
import { freePort } from '../helpers/stdout-readers.ts';

const BIN = fileURLToPath(new URL('../../bin/opspad.js', import.meta.url));
/** `opspad mcp` exits within a second of its session ending; the rest is a loaded machine's margin. */
const MCP_EXIT_MS = 1000;
const MARGIN_MS = 4000;

describe('opspad mcp ends with its session, whatever is in flight', () => {
  let harness: Harness;
  let tenant: Tenant;
  let silent: Server;
  let silentUrl: string;
  /** Resolvers for tool calls that reached the silent opspad (it never answers them). */
  const arrivals: (() => void)[] = [];
  const mcps: ChildProcess[] = [];

  beforeAll(async () => {
    harness = await startHarness('postgres');
    tenant = await harness.newTenant();
    // Answers reads from the real opspad (the tool list), never answers a tool call.
    silent = createServer((req, res) => {
      if (req.method !== 'GET') {
        req.resume();
        arrivals.shift()?.();
        return;
      }
      fetch(`${harness.url}${req.url}`, { headers: { authorization: req.headers.authorization ?? '' } }).then(
        async (answer) => {
          res.writeHead(answer.status, { 'content-type': 'application/json' }).end(await answer.text());
        },
        () => res.writeHead(502).end(),
      );
    });
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    silentUrl = `http://127.0.0.1:${(silent.address() as AddressInfo).port}`;
  });

  afterEach(async () => {
    for (const child of mcps.splice(0)) {
      if (child.exitCode === null && child.signalCode === null) {
        const exited = new Promise((resolve) => child.once('exit', resolve));
        child.kill('SIGKILL');
        await exited;
      }
    }
  });

  afterAll(async () => {
    silent?.closeAllConnections();
    await new Promise((resolve) => silent?.close(resolve));
    await harness?.close();
  });

  /** An initialized `opspad mcp` with one tool call that the silent opspad has received. */
  async function mcpWithCallInFlight(): Promise<{ child: ChildProcess; exited: Promise<Exit>; send(m: object): void }> {
    const child = spawn(process.execPath, [BIN, 'mcp', '--conversation', randomUUID()], {
      env: { PATH: process.env.PATH ?? '', OPSPAD_URL: silentUrl, OPSPAD_API_KEY: tenant.apiKey },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    mcps.push(child);
    const exited = new Promise<Exit>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
    let stderr = '';
    child.stderr?.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const answers = new Map<number, (message: unknown) => void>();
    createInterface({ input: child.stdout as NodeJS.ReadableStream }).on('line', (line) => {
      const message = JSON.parse(line) as { id?: number };
      if (message.id !== undefined) {
        answers.get(message.id)?.(message);
      }
    });
    const send = (message: object) => child.stdin?.write(`${JSON.stringify({ jsonrpc: '2.0', ...message })}\n`);
    const answered = (id: number) => new Promise((resolve) => answers.set(id, resolve));

    const initialized = answered(1);
    send({
      id: 1,
      method: 'initialize',
      params: {
        protocolVersion: LATEST_PROTOCOL_VERSION,
        capabilities: {},
        clientInfo: { name: 'lifecycle-test', version: '0.0.0' },
      },
    });
    await within(initialized, 30_000, `opspad mcp to initialize; stderr: ${stderr}`);
    send({ method: 'notifications/initialized' });
    const arrived = new Promise<void>((resolve) => arrivals.push(resolve));
    send({
      id: 2,
      method: 'tools/call',
      params: { name: 'manage_assistant_operation', arguments: { action: 'progress' } },
    });
    await within(arrived, 30_000, 'the tool call to reach opspad');
    return { child, exited, send };
  }

  it('closing stdin ends it within a second, with exit code 0', async () => {
    const { child, exited } = await mcpWithCallInFlight();
    child.stdin?.end();
    expect(await within(exited, MCP_EXIT_MS + MARGIN_MS, 'opspad mcp to exit after stdin closed')).toEqual({
      code: 0,
      signal: null,
    });
  });

  it('SIGTERM ends it within a second, with exit code 0', async () => {
    const { child, exited } = await mcpWithCallInFlight();
    child.kill('SIGTERM');
    expect(await within(exited, MCP_EXIT_MS + MARGIN_MS, 'opspad mcp to exit after SIGTERM')).toEqual({
      code: 0,
      signal: null,
    });
  });

  it('a client that stops reading stdout for good (EPIPE) ends it within a second', async () => {
    const { child, exited, send } = await mcpWithCallInFlight();
    child.stdout?.destroy();
    send({ id: 3, method: 'tools/list' }); // its answer meets the closed pipe
    expect(await within(exited, MCP_EXIT_MS + MARGIN_MS, 'opspad mcp to exit after EPIPE')).toEqual({
      code: 0,
      signal: null,
    });
  });
});

describe('opspad demo stopped by SIGTERM', () => {
  // Its own database: the demo's reconciler must not adopt other files' operations.
  let database: PrivateDatabase;
  let db: OpspadDatabase;
  beforeAll(async () => {
    database = await privatePostgresDatabase('demo_stop');
    db = createPostgresDatabase({ connectionString: database.url, poolSize: 1 });
  });
  afterEach(() => killAllChildren());
  afterAll(async () => {
    await db?.close();
    await database?.drop();
  });

  it('stops the opspad it started within the bound, with nothing left leased', { timeout: 120_000 }, async () => {
    const bound = 5000;
    const items = 20_000;
    const demo = spawnOpspad('demo', ['demo', '--items', String(items), '--latency-ms', '50', '--exit'], {
      DATABASE_URL: database.url,
      REDIS_URL: inject('redisUrl'),
      OPSPAD_QUEUE_PREFIX: harnessPrefix(),
      OPSPAD_SHUTDOWN_TIMEOUT: `${bound}ms`,
      HOST: '127.0.0.1',
      PORT: String(await freePort()),
    });
    const announced = await demo.waitForLine((line) => line.startsWith('Operation '), 'the demo operation');
    const operationId = /^Operation ([0-9a-f-]{36}):/.exec(announced)?.[1] as string;
    // Some progress first: batches are running when the signal arrives.
    await demo.waitForLine((line) => Number(/ (\d+)\/20000 /.exec(line)?.[1] ?? 0) > 0, 'progress', 60_000);

    demo.process.kill('SIGTERM');
    expect(await within(demo.exited, bound + 10_000, 'opspad demo to exit after SIGTERM'), demo.stderr()).toEqual({
      code: 0,
      signal: null,
    });
    const rows = await db.query<{ status: string; n: number }>(
      'SELECT status, count(*)::int AS n FROM assistant_operation_item WHERE operation_id = $1 GROUP BY status',
      [operationId],
    );
    const states = Object.fromEntries(rows.map((row) => [row.status, row.n]));
    expect(states.leased).toBeUndefined();
    expect(Object.values(states).reduce((sum, n) => sum + n, 0)).toBe(items);
    expect((states.completed ?? 0) + (states.failed ?? 0)).toBeGreaterThan(0);
  });
});
