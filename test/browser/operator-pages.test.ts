/**
 * The operator's pages in a real browser (Debian's Chromium, driven by playwright-core): log in
 * to Bull Board and the operator view, watch a running operation advance, pause it with the
 * button, and save a screenshot under test/artifacts/. Neither page trips its own Content
 * Security Policy (the browser reports every blocked script, style or request).
 */

import { randomUUID } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHROMIUM_SETUP_TIMEOUT_MS, launchChromium } from '../helpers/chromium.ts';
import { type Harness, ids, startHarness } from '../helpers/harness.ts';
import { waitForProgress } from '../helpers/wait.ts';

const ARTIFACTS = fileURLToPath(new URL('../artifacts/', import.meta.url));

describe('the operator pages in a browser (postgres)', () => {
  let harness: Harness;
  let browser: Browser;

  beforeAll(async () => {
    harness = await startHarness('postgres', { workers: true, env: { OPSPAD_LEASE_TTL: '30s' } });
    browser = await launchChromium();
  }, CHROMIUM_SETUP_TIMEOUT_MS);
  afterAll(async () => {
    await browser?.close();
    await harness?.close();
  });

  it('shows the queues and a running operation, and pauses it with the button', async () => {
    const tenant = await harness.newTenant();
    const created = await tenant.op(randomUUID(), {
      action: 'create',
      operation_type: 'demo',
      total_items: 20_000,
      item_ids: ids(20_000, 'lead'),
      batch_size: 50,
      max_parallel_batches: 2,
      query_params: { latency_ms: 150, failure_rate: 0.05 },
    });
    const operationId = created.body.operation_id as string;
    const context = await browser.newContext({
      httpCredentials: { username: 'admin', password: 'test-admin-password' },
      viewport: { width: 1280, height: 720 },
    });
    const page = await context.newPage();
    const violations: string[] = [];
    page.on('console', (message) => {
      if (/Content Security Policy/i.test(message.text())) {
        violations.push(message.text());
      }
    });

    await page.goto(`${harness.url}/admin/queues`);
    await page.getByText('batches-demo').first().waitFor({ timeout: 15_000 });
    // The board's own scripts, styles and API calls all load under its policy.
    await page.getByText('batches-demo').first().click();
    await page.waitForLoadState('networkidle');

    await page.goto(`${harness.url}/admin/operations`);
    const row = page.locator(`tr[data-operation-id="${operationId}"]`);
    await row.waitFor();
    const recorded = async () => Number(await row.locator('.recorded').textContent());
    const first = await recorded();
    // It advances: once the operation's event stream says more items are recorded, the page
    // shows more too.
    await waitForProgress(harness.url, tenant, operationId, (p) => p.completed_count + p.failed_count > first + 100);
    await page.reload();
    expect(await recorded()).toBeGreaterThan(first + 100);

    mkdirSync(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: join(ARTIFACTS, 'operator-view.png'), fullPage: true });

    await row.getByRole('button', { name: 'Pause' }).click();
    await page.waitForLoadState('load');
    await expect(row.locator('.status').textContent()).resolves.toBe('paused');
    const stored = await harness.db.query<{ status: string }>('SELECT status FROM assistant_operation WHERE id = $1', [
      operationId,
    ]);
    expect(stored[0]?.status).toBe('paused');
    // Nothing the pages use is blocked by their policies.
    expect(violations).toEqual([]);
    await context.close();
  });
});
