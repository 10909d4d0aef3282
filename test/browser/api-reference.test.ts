/**
 * The API reference page, /docs, in a real browser: Redoc renders the OpenAPI document from
 * this server alone — every request the page makes is same-origin (no CDN, no external font),
 * its Content Security Policy is never violated, nothing fails in the console — and a screenshot
 * is saved under test/artifacts/. Also: how the browser tests get their Chromium.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHROMIUM_SETUP_TIMEOUT_MS, chromiumPlan, launchChromium } from '../helpers/chromium.ts';
import { type Harness, startHarness } from '../helpers/harness.ts';

const ARTIFACTS = fileURLToPath(new URL('../artifacts/', import.meta.url));

describe('the API reference page in a browser (postgres)', () => {
  let harness: Harness;
  let browser: Browser;

  beforeAll(async () => {
    harness = await startHarness('postgres');
    browser = await launchChromium();
  }, CHROMIUM_SETUP_TIMEOUT_MS);
  afterAll(async () => {
    await browser?.close();
    await harness?.close();
  });

  it('renders the document from this server alone, within its Content Security Policy', async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    const requested: string[] = [];
    const problems: string[] = [];
    page.on('request', (request) => requested.push(request.url()));
    page.on('console', (message) => {
      if (message.type() === 'error') {
        problems.push(`console: ${message.text()}`);
      }
    });
    page.on('pageerror', (error) => problems.push(`page: ${error.message}`));
    await page.addInitScript({
      content: `document.addEventListener('securitypolicyviolation', (event) => {
        console.error('CSP violation: ' + event.violatedDirective + ' ' + event.blockedURI);
      });`,
    });

    const response = await page.goto(`${harness.url}/docs`);
    expect(response?.status()).toBe(200);
    expect(response?.headers()['content-security-policy']).toContain("script-src 'self'");
    // Redoc has rendered the operations, with their bodies and answers.
    await page
      .getByRole('heading', { name: 'Create, advance and manage a bulk operation (one action per call)' })
      .waitFor({ timeout: 30_000 });
    await page.getByRole('heading', { name: 'An operation’s progress as server-sent events' }).waitFor();
    expect(await page.title()).toBe('opspad API reference');

    mkdirSync(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: join(ARTIFACTS, 'api-reference.png') });

    const origin = new URL(harness.url).origin;
    const foreign = requested.filter(
      (url) => !url.startsWith('data:') && !url.startsWith('blob:') && new URL(url).origin !== origin,
    );
    expect(foreign).toEqual([]);
    expect(requested).toContain(`${origin}/openapi.json`);
    expect(requested).toContain(`${origin}/docs/assets/redoc.standalone.js`);
    expect(problems).toEqual([]);
    await context.close();
  });
});

describe('the Chromium the browser tests drive', () => {
  const machine = (existing: string[], isRoot: boolean, configured = false) => ({
    path: '/usr/bin/chromium',
    exists: (path: string) => existing.includes(path),
    isRoot,
    configured,
  });

  it('is used where it is, installed with apt-get by root, and otherwise named with the command to run', () => {
    expect(chromiumPlan(machine(['/usr/bin/chromium'], false))).toEqual({ use: '/usr/bin/chromium' });
    const install = chromiumPlan(machine(['/usr/bin/apt-get'], true));
    expect(install).toEqual({ install: expect.arrayContaining(['install', '-y', 'chromium']) });
    const notRoot = chromiumPlan(machine(['/usr/bin/apt-get'], false));
    expect(notRoot).toEqual({ fail: expect.stringContaining('sudo apt-get install -y chromium') });
    expect(chromiumPlan(machine([], true))).toEqual({ fail: expect.stringContaining('OPSPAD_TEST_CHROMIUM') });
    expect(chromiumPlan(machine(['/usr/bin/apt-get'], true, true))).toEqual({
      fail: 'OPSPAD_TEST_CHROMIUM is /usr/bin/chromium, which does not exist.',
    });
  });
});
