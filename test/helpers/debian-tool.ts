/**
 * A program some tests need from Debian's packages (Chromium for the browser tests, PgBouncer for
 * the pooler tests): used where it is, installed with apt-get when it is missing and the run is
 * root, and otherwise a failure that says the command to run. The README's one test command then
 * works on a fresh machine, as in CI.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';

const APT_GET = '/usr/bin/apt-get';

export interface DebianTool {
  /** As people write it: `Chromium`. */
  name: string;
  /** Debian's package: `chromium`. */
  package: string;
  defaultPath: string;
  /** The variable that points elsewhere: `OPSPAD_TEST_CHROMIUM`. */
  variable: string;
  /** Who needs it: `The browser tests`. */
  neededBy: string;
  /** What the variable may name: `a Chromium or Chrome executable`. */
  executable: string;
  /** How long the hook that may install it may take; apt-get gets half of it per call. */
  setupTimeoutMs: number;
}

export type ToolPlan = { use: string } | { install: string[] } | { fail: string };

/** What to do, given the machine (pure, so every branch has a test). */
export function toolPlan(
  tool: DebianTool,
  machine: { path: string; exists: (path: string) => boolean; isRoot: boolean; configured: boolean },
): ToolPlan {
  if (machine.exists(machine.path)) {
    return { use: machine.path };
  }
  if (machine.configured) {
    return { fail: `${tool.variable} is ${machine.path}, which does not exist.` };
  }
  if (machine.isRoot && machine.exists(APT_GET)) {
    // The lock timeout makes concurrent installs (two test files) wait for each other.
    return {
      install: ['-o', 'DPkg::Lock::Timeout=300', 'install', '-y', '-qq', '--no-install-recommends', tool.package],
    };
  }
  return {
    fail: `${tool.neededBy} need ${tool.name} at ${machine.path}. Install it with: sudo apt-get install -y ${tool.package} (Debian, Ubuntu), or set ${tool.variable} to ${tool.executable}.`,
  };
}

function aptGet(tool: DebianTool, args: readonly string[]): { ok: boolean; output: string } {
  const run = spawnSync(APT_GET, args, {
    encoding: 'utf8',
    env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
    timeout: tool.setupTimeoutMs / 2,
  });
  return { ok: run.status === 0, output: `${run.stdout ?? ''}${run.stderr ?? ''}`.slice(-2000) };
}

/** The tool's executable, installed first if this machine lacks it and allows it. */
export function ensureTool(tool: DebianTool): string {
  const configured = process.env[tool.variable];
  const path = configured ?? tool.defaultPath;
  const plan = toolPlan(tool, { path, exists: existsSync, isRoot: process.getuid?.() === 0, configured: !!configured });
  if ('use' in plan) {
    return plan.use;
  }
  if ('fail' in plan) {
    throw new Error(plan.fail);
  }
  // A fresh machine's package lists may be empty or stale: refresh them when a first try fails.
  let result = aptGet(tool, plan.install);
  if (!result.ok) {
    const update = aptGet(tool, ['update', '-qq']);
    result = update.ok ? aptGet(tool, plan.install) : update;
  }
  if (!result.ok || !existsSync(path)) {
    throw new Error(`Installing ${tool.name} failed (apt-get ${plan.install.join(' ')}): ${result.output}`);
  }
  return path;
}
