/**
 * The operator's pages in a real browser (Debian's Chromium, driven by playwright-core): Bull
 * Board with its queue named by operation type and its way to the operator view; the operator
 * view following a running operation live — the counts grow with no reload and the rows keep
 * their order; an operation's page with its failures grouped by reason and its audit trail; Pause
 * and a confirmed Cancel. No page asks another host for anything, and none trips its own Content
 * Security Policy (the browser reports every blocked script, style or request). Screenshots of the
 * list and of an operation's page go to test/artifacts/ (docs/ holds the copies its pages show).
 */

import { randomUUID } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHROMIUM_SETUP_TIMEOUT_MS, launchChromium } from '../helpers/chromium.ts';
import { type Harness, ids, startHarness } from '../helpers/harness.ts';
import { waitForProgress } from '../helpers/wait.ts';

const ARTIFACTS = fileURLToPath(new URL('../artifacts/', import.meta.url));

/** The number a row shows as recorded ("1,234" reads 1234). */
async function recordedOf(page: Page, operationId: string): Promise<number> {
  const text = await page.locator(`tr[data-operation-id="${operationId}"] .recorded`).first().textContent();
  return Number((text ?? '').replaceAll(',', ''));
}

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

  it('follows a running operation live, shows its failures and trail, and pauses and cancels it', async () => {
    const tenant = await harness.newTenant();
    const other = await harness.newTenant();
    // Beside the one to watch: an operation the circuit breaker paused, and one forced complete
    // with items abandoned.
    const tripped = await other.op(randomUUID(), {
      action: 'create',
      operation_type: 'demo',
      total_items: 400,
      item_ids: ids(400, 'contact'),
      batch_size: 20,
      max_failure_rate: 0.3,
      query_params: { latency_ms: 5, failure_rate: 0.6 },
    });
    await waitForProgress(harness.url, other, tripped.body.operation_id as string, (p) => p.status === 'paused');
    const invoices = randomUUID();
    const forced = await other.op(invoices, {
      action: 'create',
      operation_type: 'send_invoices',
      total_items: 12,
      item_ids: ids(12, 'invoice'),
      execution: 'assistant',
    });
    await other.op(invoices, {
      action: 'update',
      operation_id: forced.body.operation_id,
      completed_ids: ids(9, 'invoice'),
      failed: [{ id: 'invoice-10', reason: 'customer has no billing e-mail' }],
    });
    await other.op(invoices, { action: 'complete', operation_id: forced.body.operation_id, force: true });
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
      viewport: { width: 1440, height: 900 },
    });
    const page = await context.newPage();
    const violations: string[] = [];
    page.on('console', (message) => {
      if (/Content Security Policy/i.test(message.text())) {
        violations.push(message.text());
      }
    });
    const elsewhere: string[] = [];
    const here = new URL(harness.url).host;
    page.on('request', (request) => {
      const url = new URL(request.url());
      if (url.protocol.startsWith('http') && url.host !== here) {
        elsewhere.push(request.url());
      }
    });

    // Bull Board: the queue goes by its operation type, and the operator view is one click away.
    await page.goto(`${harness.url}/admin/queues/queue/demo?status=completed`);
    await page.getByRole('heading', { name: 'demo' }).waitFor({ timeout: 15_000 });
    await page.getByText(/item\(s\) failed in \d+ operation\(s\) in the last 7 days/).waitFor();
    // A batch whose items failed says so in its name, though the job itself completed.
    await page
      .getByText(/^run-batch · \d+ of \d+ items failed$/)
      .first()
      .waitFor();
    await page.waitForLoadState('networkidle');
    mkdirSync(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: join(ARTIFACTS, 'bull-board.png') });
    await page.getByRole('link', { name: 'Operations ›' }).click();
    await page.waitForURL(`${harness.url}/admin/operations`);

    const row = page.locator(`tr[data-operation-id="${operationId}"]`);
    await row.waitFor();
    await page.locator('#live.on').waitFor();
    const order = async () =>
      page.locator('tbody#rows tr').evaluateAll((rows) => rows.map((r) => r.dataset.operationId));
    const before = await order();
    const first = await recordedOf(page, operationId);
    // It advances with no reload: the page's own marker survives while the count grows.
    await page.evaluate(() => {
      (globalThis as { stayed?: boolean }).stayed = true;
    });
    await expect
      .poll(() => recordedOf(page, operationId), { timeout: 30_000, interval: 100 })
      .toBeGreaterThan(first + 100);
    expect(await page.evaluate(() => (globalThis as { stayed?: boolean }).stayed)).toBe(true);
    expect(await order()).toEqual(before);
    await expect(row.locator('.pace').textContent()).resolves.toMatch(/\/(s|min)$/);
    await expect(row.locator('.eta').textContent()).resolves.toMatch(/^ETA /);
    // Rows in order of creation, whatever their status: the paused and the completed stay below.
    expect(before[0]).toBe(operationId);
    await page.screenshot({ path: join(ARTIFACTS, 'operator-view.png'), fullPage: true });

    await row.getByRole('button', { name: 'Pause' }).click();
    await page.waitForLoadState('load');
    await expect(row.locator('.status').textContent()).resolves.toBe('paused');
    await expect(row.locator('.paused-by').textContent()).resolves.toContain('operator admin');

    // The operation's page: failures by reason, the trail naming the operator.
    await row.getByRole('link', { name: 'demo' }).click();
    await page.waitForURL(`${harness.url}/admin/operations/${operationId}`);
    await page.locator('#live.on').waitFor();
    await expect(page.locator('td.group-count').first().textContent()).resolves.toMatch(/^[\d,]+$/);
    const paused = page.locator('#audit-rows tr', { hasText: 'paused' });
    await expect(paused.locator('.actor').textContent()).resolves.toBe('operator:admin');
    await page.screenshot({ path: join(ARTIFACTS, 'operator-operation.png'), fullPage: true });

    // Cancel asks first; the trail then says who cancelled it, live.
    await page.getByRole('link', { name: 'Cancel…' }).first().click();
    await page.getByText(/not recorded yet are abandoned/).waitFor();
    await page.getByRole('button', { name: 'Cancel the operation' }).click();
    await page.waitForURL(`${harness.url}/admin/operations/${operationId}`);
    await expect(page.locator('h1 .status').textContent()).resolves.toBe('cancelled');
    await expect(
      page.locator('#audit-rows tr', { hasText: 'cancelled' }).locator('.actor').textContent(),
    ).resolves.toBe('operator:admin');
    const stored = await harness.db.query<{ status: string }>('SELECT status FROM assistant_operation WHERE id = $1', [
      operationId,
    ]);
    expect(stored[0]?.status).toBe('cancelled');

    // Nothing the pages use is blocked by their policies, and nothing was asked of another host.
    expect(violations).toEqual([]);
    expect(elsewhere).toEqual([]);
    await context.close();
  });
});
