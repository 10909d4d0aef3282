/**
 * opspad as a user's project gets it: `npm pack`, then a new project in a temporary directory
 * outside the repository installs the tarball. There a TypeScript handler imports defineHandler
 * from `opspad` and typechecks with `tsc --strict` (and lines that must not compile do not); an
 * app calls createOpspad({handlers}) and drives an operation to completion with opspad/client;
 * `npx opspad --help` works, and `npx opspad migrate` applies every shipped migration to a new
 * embedded database; a `.ts` handler named in OPSPAD_HANDLERS loads with the loader docs/workers.md
 * names, and without one is refused with the way to run it.
 *
 * Offline-friendly: the install prefers npm's cache (`--prefer-offline`; the first run on a
 * machine downloads opspad's dependencies once) and runs no install script; TypeScript and
 * @types/node, which a user installs as dev dependencies, are linked from this repository's
 * node_modules instead of installed.
 */
import { type SpawnOptions, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { fileDatabaseUrl } from '../helpers/file-database.ts';
import { harnessPrefix } from '../helpers/harness.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const REPO_MODULES = join(ROOT, 'node_modules');

interface Run {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** The environment of a fresh shell: no npm_* variables of the `npm test` around this run. */
function shellEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env = Object.fromEntries(
    Object.entries(process.env).filter(
      ([name]) => !/^npm_/i.test(name) && !name.startsWith('OPSPAD_') && !['DATABASE_URL', 'REDIS_URL'].includes(name),
    ),
  );
  return { ...env, NO_UPDATE_NOTIFIER: '1', ...extra };
}

/**
 * Runs a command to its end; with `stopWhen`, sends it SIGTERM once its stdout satisfies it (a
 * service that started), and resolves when it has stopped.
 */
function run(
  command: string,
  args: string[],
  options: SpawnOptions & { timeoutMs: number; stopWhen?: (stdout: string) => boolean },
): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { ...options, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    let stopping = false;
    child.stdout?.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
      if (!stopping && options.stopWhen?.(stdout)) {
        stopping = true;
        child.kill('SIGTERM');
      }
    });
    child.stderr?.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${command} ${args.join(' ')} did not finish within ${options.timeoutMs} ms\n${stderr}`));
    }, options.timeoutMs);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

const HANDLER = `import { defineHandler, ItemError } from 'opspad';

export default defineHandler({
  type: 'greet',
  concurrency: 2,
  async handle(contactId, ctx) {
    if (contactId.startsWith('bad-')) {
      throw new ItemError(\`no address for \${contactId}\`);
    }
    ctx.logger.debug({ contactId, key: ctx.idempotencyKey }, 'greeted');
  },
});
`;

const APP = `import { randomUUID } from 'node:crypto';
import { createOpspad, StartFailedError } from 'opspad';
import { createClient, OpspadError } from 'opspad/client';
import greet from './handler.js';

const opspad = await createOpspad({ handlers: [greet] });
try {
  const { api_key } = await opspad.createApiKey('consumer');
  const client = createClient({ baseUrl: opspad.url ?? '', apiKey: api_key });
  const conversation = randomUUID();
  const created = await client.operations.create(conversation, {
    operation_type: 'greet',
    total_items: 5,
    item_ids: ['a', 'b', 'bad-1', 'c', 'd'],
    batch_size: 2,
  });
  const final = await client.operations.finished(created.operation_id);
  const details = await client.operations.get(conversation, { operation_id: created.operation_id });
  const refused = await client.operations.status(randomUUID()).catch((error: unknown) => error);
  const code = refused instanceof OpspadError ? refused.code : null;
  // A second opspad on the same port fails at its HTTP server, closing what it opened: this
  // process still ends by itself.
  const port = new URL(opspad.url ?? '').port;
  const startFailedAt = await createOpspad({ env: { ...process.env, PORT: port } }).then(
    async (started) => {
      await started.close();
      return null;
    },
    (error: unknown) => (error instanceof StartFailedError ? error.step : String(error)),
  );
  console.log(JSON.stringify({ execution: created.execution, final, failures: details.failures, code, startFailedAt }));
} finally {
  await opspad.close();
}
`;

/** Each statement below must be refused: proof that the package's types are real, not `any`. */
const MUST_NOT_COMPILE = `import { defineHandler } from 'opspad';
import { createClient } from 'opspad/client';

// @ts-expect-error: "concurency" is not a handler setting.
defineHandler({ type: 'x', concurency: 2, async handle() {} });
const client = createClient({ baseUrl: 'http://127.0.0.1:1', apiKey: 'k' });
// @ts-expect-error: total_items is a number.
void client.operations.create('c', { operation_type: 'x', total_items: '2', item_ids: ['a'] });
export async function statusOf(
  id: string,
): Promise<'active' | 'awaiting_approval' | 'paused' | 'completed' | 'cancelled'> {
  return (await client.operations.status(id)).status;
}
`;

const TSCONFIG = {
  compilerOptions: {
    strict: true,
    target: 'es2022',
    module: 'nodenext',
    moduleResolution: 'nodenext',
    types: ['node'],
    outDir: 'out',
  },
  files: ['handler.ts', 'app.ts', 'must-not-compile.ts'],
};

/** Each step starts processes (npm, tsc, node): generous on a loaded machine, bounded all the same. */
const STEP_TIMEOUT_MS = 180_000;

describe('opspad installed from its tarball into a new project', { timeout: STEP_TIMEOUT_MS }, () => {
  const work = mkdtempSync(join(tmpdir(), 'opspad-consumer-'));
  const project = join(work, 'project');
  let tarball: string;
  let files: string[];

  beforeAll(async () => {
    // dist/ is fresh (built before the run), so the pack skips `prepare` and its second build.
    const packed = await run('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', work], {
      cwd: ROOT,
      env: shellEnv(),
      timeoutMs: 60_000,
    });
    expect(packed.code, packed.stderr).toBe(0);
    const [info] = JSON.parse(packed.stdout) as { filename: string; files: { path: string }[] }[];
    tarball = join(work, info?.filename ?? '');
    files = (info?.files ?? []).map((file) => file.path);

    mkdirSync(project);
    writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'consumer', private: true, type: 'module' }));
    const installed = await run(
      'npm',
      ['install', tarball, '--prefer-offline', '--ignore-scripts', '--no-audit', '--no-fund', '--loglevel=error'],
      { cwd: project, env: shellEnv(), timeoutMs: 240_000 },
    );
    expect(installed.code, installed.stderr).toBe(0);
    mkdirSync(join(project, 'node_modules', '@types'), { recursive: true });
    symlinkSync(join(REPO_MODULES, 'typescript'), join(project, 'node_modules', 'typescript'), 'dir');
    symlinkSync(join(REPO_MODULES, '@types', 'node'), join(project, 'node_modules', '@types', 'node'), 'dir');
    // A loader for the `.ts` handler, as docs/workers.md tells users to install one.
    symlinkSync(join(REPO_MODULES, 'tsx'), join(project, 'node_modules', 'tsx'), 'dir');
    writeFileSync(join(project, 'handler.ts'), HANDLER);
    writeFileSync(join(project, 'app.ts'), APP);
    writeFileSync(join(project, 'must-not-compile.ts'), MUST_NOT_COMPILE);
    writeFileSync(join(project, 'tsconfig.json'), JSON.stringify(TSCONFIG, null, 2));
  }, 330_000);

  afterAll(() => {
    rmSync(work, { recursive: true, force: true });
  });

  it('ships what runs and nothing else', () => {
    expect(files).toEqual(
      expect.arrayContaining([
        'package.json',
        'README.md',
        'CHANGELOG.md',
        'docs/configuration.md',
        'LICENSE',
        'bin/opspad.js',
        'dist/index.js',
        'dist/index.d.ts',
        'dist/client/index.js',
        'dist/client/index.d.ts',
        'dist/ai-sdk/index.js',
        'dist/ai-sdk/index.d.ts',
        'dist/openai-agents/index.js',
        'dist/openai-agents/index.d.ts',
        'dist/cli/main.js',
        'dist/vendor/redoc/redoc.standalone.js',
        'dist/vendor/redoc/LICENSE',
        // The server-side functions' files, which the migrator applies.
        'dist/store/leases/sql/opspad_lease_step.sql',
        'dist/store/operations/sql/opspad_delete_operation_items.sql',
        'drizzle/meta/_journal.json',
      ]),
    );
    expect(files.filter((path) => path.endsWith('.sql')).length).toBeGreaterThan(0);
    const outside = files.filter(
      (path) =>
        !/^(dist\/|drizzle\/|bin\/opspad\.js$|package\.json$|README\.md$|CHANGELOG\.md$|docs\/[\w-]+\.md$|LICENSE$)/.test(
          path,
        ),
    );
    expect(outside).toEqual([]);
    expect(files.filter((path) => /\.test\.|\.ts$/.test(path) && !path.endsWith('.d.ts'))).toEqual([]);
  });

  it('typechecks a handler and an app written against opspad and opspad/client with tsc --strict', async () => {
    const tsc = await run(process.execPath, [join(project, 'node_modules/typescript/bin/tsc'), '-p', '.'], {
      cwd: project,
      env: shellEnv(),
      timeoutMs: 120_000,
    });
    expect(`${tsc.stdout}${tsc.stderr}`).toBe('');
    expect(tsc.code).toBe(0);
    expect(readdirSync(join(project, 'out')).sort()).toEqual(['app.js', 'handler.js', 'must-not-compile.js']);
  });

  it('runs createOpspad({handlers}), drives a background operation to its end with opspad/client, and sees a second start on its port fail cleanly', async () => {
    const app = await run(process.execPath, ['out/app.js'], {
      cwd: project,
      env: shellEnv({
        DATABASE_URL: fileDatabaseUrl(),
        REDIS_URL: inject('redisUrl'),
        OPSPAD_QUEUE_PREFIX: harnessPrefix(),
        HOST: '127.0.0.1',
        PORT: '0',
        OPSPAD_LOG_LEVEL: 'warn',
      }),
      timeoutMs: 120_000,
    });
    expect(app.code, app.stderr).toBe(0);
    const result = JSON.parse(app.stdout.trim().split('\n').at(-1) ?? '{}');
    expect(result).toMatchObject({
      execution: 'background',
      final: { status: 'completed', completed_count: 4, failed_count: 1, remaining_count: 0 },
      failures: [{ id: 'bad-1', reason: 'no address for bad-1' }],
      code: 'not_found',
      startFailedAt: 'HTTP server',
    });
  });

  it('runs npx opspad from the project (help, migrate); a TypeScript handler loads with a loader, and without one is refused with the way', async () => {
    const help = await run('npx', ['--no-install', 'opspad', '--help'], {
      cwd: project,
      env: shellEnv(),
      timeoutMs: 60_000,
    });
    expect(help.code, help.stderr).toBe(0);
    expect(help.stdout).toContain('Usage: opspad <command>');

    // Every migration ships, and is found from the compiled code: a new embedded database gets them all.
    const migrated = await run('npx', ['--no-install', 'opspad', 'migrate'], {
      cwd: project,
      env: shellEnv({ OPSPAD_DATA_DIR: join(work, 'embedded') }),
      timeoutMs: 120_000,
    });
    expect(migrated.code, migrated.stderr).toBe(0);
    expect(migrated.stdout).toContain('Migrations applied (pglite; queue: ');

    const worker = await run('npx', ['--no-install', 'opspad', 'worker'], {
      cwd: project,
      env: shellEnv({
        DATABASE_URL: fileDatabaseUrl(),
        REDIS_URL: inject('redisUrl'),
        OPSPAD_QUEUE_PREFIX: `${harnessPrefix()}-${randomUUID().slice(0, 4)}`,
        OPSPAD_HANDLERS: './handler.ts',
      }),
      timeoutMs: 60_000,
    });
    expect(worker.code).toBe(1);
    expect(worker.stderr).toContain('OPSPAD_HANDLERS: ./handler.ts is TypeScript');
    expect(worker.stderr).toContain('NODE_OPTIONS="--import tsx"');

    // With the loader docs/workers.md names, the same worker starts, then stops on SIGTERM (sent to
    // the command npx would run, node_modules/.bin/opspad, so the signal reaches it directly).
    const loaded = await run(join(project, 'node_modules', '.bin', 'opspad'), ['worker'], {
      cwd: project,
      env: shellEnv({
        NODE_OPTIONS: '--import tsx',
        DATABASE_URL: fileDatabaseUrl(),
        REDIS_URL: inject('redisUrl'),
        OPSPAD_QUEUE_PREFIX: `${harnessPrefix()}-${randomUUID().slice(0, 4)}`,
        OPSPAD_HANDLERS: './handler.ts',
        OPSPAD_LOG_LEVEL: 'info',
      }),
      timeoutMs: 60_000,
      stopWhen: (stdout) => stdout.includes('"msg":"workers started"'),
    });
    expect(loaded.stdout).toContain('"msg":"workers started"');
    // It exits 0 after a graceful stop; a SIGTERM that lands in the instant between the log line
    // and the CLI's signal handlers ends it by the signal instead. Either way it stopped.
    expect(loaded.code === 0 || loaded.signal === 'SIGTERM', `${loaded.code} ${loaded.signal} ${loaded.stderr}`).toBe(
      true,
    );
  });
});
