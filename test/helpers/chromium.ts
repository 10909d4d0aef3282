/**
 * The browser the browser tests drive: Debian's Chromium (playwright-core downloads none of its
 * own), at /usr/bin/chromium or wherever OPSPAD_TEST_CHROMIUM points. On a machine without it,
 * `npm test` installs it when it can (root, with apt-get), and otherwise fails with the command
 * to run: the README's one test command then works on a fresh machine, as in CI.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { type Browser, chromium } from 'playwright-core';

export const DEFAULT_CHROMIUM = '/usr/bin/chromium';
const APT_GET = '/usr/bin/apt-get';
/** Installing Chromium takes a minute or two: the hook that does it may take this long. */
export const CHROMIUM_SETUP_TIMEOUT_MS = 600_000;

export type ChromiumPlan = { use: string } | { install: string[] } | { fail: string };

/** What to do, given the machine (pure, so every branch has a test). */
export function chromiumPlan(machine: {
  path: string;
  exists: (path: string) => boolean;
  isRoot: boolean;
  configured: boolean;
}): ChromiumPlan {
  if (machine.exists(machine.path)) {
    return { use: machine.path };
  }
  if (machine.configured) {
    return { fail: `OPSPAD_TEST_CHROMIUM is ${machine.path}, which does not exist.` };
  }
  if (machine.isRoot && machine.exists(APT_GET)) {
    // The lock timeout makes concurrent installs (two browser test files) wait for each other.
    return {
      install: ['-o', 'DPkg::Lock::Timeout=300', 'install', '-y', '-qq', '--no-install-recommends', 'chromium'],
    };
  }
  return {
    fail: `The browser tests need Chromium at ${machine.path}. Install it with: sudo apt-get install -y chromium (Debian, Ubuntu), or set OPSPAD_TEST_CHROMIUM to a Chromium or Chrome executable.`,
  };
}

function aptGet(args: readonly string[]): { ok: boolean; output: string } {
  const run = spawnSync(APT_GET, args, {
    encoding: 'utf8',
    env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
    timeout: CHROMIUM_SETUP_TIMEOUT_MS / 2,
  });
  return { ok: run.status === 0, output: `${run.stdout ?? ''}${run.stderr ?? ''}`.slice(-2000) };
}

/** The Chromium executable, installed first if this machine lacks it and allows it. */
export function ensureChromium(): string {
  const configured = process.env.OPSPAD_TEST_CHROMIUM;
  const path = configured ?? DEFAULT_CHROMIUM;
  const plan = chromiumPlan({ path, exists: existsSync, isRoot: process.getuid?.() === 0, configured: !!configured });
  if ('use' in plan) {
    return plan.use;
  }
  if ('fail' in plan) {
    throw new Error(plan.fail);
  }
  // A fresh machine's package lists may be empty or stale: refresh them when a first try fails.
  let result = aptGet(plan.install);
  if (!result.ok) {
    const update = aptGet(['update', '-qq']);
    result = update.ok ? aptGet(plan.install) : update;
  }
  if (!result.ok || !existsSync(path)) {
    throw new Error(`Installing Chromium failed (apt-get ${plan.install.join(' ')}): ${result.output}`);
  }
  return path;
}

/** Launches the browser the way every browser test does. */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: ensureChromium(),
    headless: true,
    // Chromium phones home at start; this machine has no network beyond loopback.
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}
