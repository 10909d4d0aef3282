/**
 * The browser the browser tests drive: Debian's Chromium (playwright-core downloads none of its
 * own), at /usr/bin/chromium or wherever OPSPAD_TEST_CHROMIUM points. On a machine without it,
 * `npm test` installs it when it can (root, with apt-get), and otherwise fails with the command
 * to run: the README's one test command then works on a fresh machine, as in CI.
 */
import { type Browser, chromium } from 'playwright-core';
import { type DebianTool, ensureTool, type ToolPlan, toolPlan } from './debian-tool.ts';

export const DEFAULT_CHROMIUM = '/usr/bin/chromium';
/** Installing Chromium takes a minute or two: the hook that does it may take this long. */
export const CHROMIUM_SETUP_TIMEOUT_MS = 600_000;

const CHROMIUM: DebianTool = {
  name: 'Chromium',
  package: 'chromium',
  defaultPath: DEFAULT_CHROMIUM,
  variable: 'OPSPAD_TEST_CHROMIUM',
  neededBy: 'The browser tests',
  executable: 'a Chromium or Chrome executable',
  setupTimeoutMs: CHROMIUM_SETUP_TIMEOUT_MS,
};

/** What to do, given the machine (see toolPlan). */
export const chromiumPlan = (machine: Parameters<typeof toolPlan>[1]): ToolPlan => toolPlan(CHROMIUM, machine);

/** The Chromium executable, installed first if this machine lacks it and allows it. */
export const ensureChromium = (): string => ensureTool(CHROMIUM);

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
