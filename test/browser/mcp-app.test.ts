/**
 * The live progress app (MCP Apps) in a real browser: its HTML, read from `/mcp` as a host reads
 * it, runs in a cross-origin frame of a host page; the host side is ext-apps' own AppBridge (in
 * this process, its messages carried to and from the frame's window), forwarding the view's tool
 * calls to opspad through the SDK's Streamable HTTP client. The view shows the operation's counts
 * from a tool result, and its Pause button pauses the operation (checked at the database). It
 * loads nothing from anywhere and trips no rule of its Content Security Policy.
 */
import { randomUUID } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { AppBridge } from '@modelcontextprotocol/ext-apps/app-bridge';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { CallToolResult, JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHROMIUM_SETUP_TIMEOUT_MS, launchChromium } from '../helpers/chromium.ts';
import { type Harness, ids, startHarness } from '../helpers/harness.ts';
import { connectMcp, type McpHttpSession } from '../helpers/mcp-http.ts';

const ARTIFACTS = fileURLToPath(new URL('../artifacts/', import.meta.url));
const HOST = 'https://host.example';
const VIEW = 'https://view.example';
const HOST_PAGE = `<!doctype html><html><body>
<iframe id="view" src="${VIEW}/operation.html" style="width:640px;height:420px;border:0"></iframe>
<script>
  const frame = document.getElementById('view');
  window.addEventListener('message', (event) => {
    if (event.source === frame.contentWindow) window.toHost(event.data);
  });
  window.toView = (message) => frame.contentWindow.postMessage(message, '*');
</script></body></html>`;

describe('the operation app in a browser, with ext-apps’ host bridge', () => {
  let harness: Harness;
  let browser: Browser;
  let session: McpHttpSession;

  beforeAll(async () => {
    harness = await startHarness('postgres');
    browser = await launchChromium();
  }, CHROMIUM_SETUP_TIMEOUT_MS);
  afterAll(async () => {
    await session?.close();
    await browser?.close();
    await harness?.close();
  });

  it('shows the counts of a tool result, and pauses the operation from its button', { timeout: 240_000 }, async () => {
    const tenant = await harness.newTenant();
    session = await connectMcp(`${harness.url}/mcp?conversation=${randomUUID()}`, tenant.apiKey);
    const tools = (await session.client.listTools()).tools;
    const operationTool = tools.find((tool) => tool.name === 'manage_assistant_operation');
    expect(operationTool?._meta).toMatchObject({ ui: { resourceUri: 'ui://opspad/operation.html' } });

    const created = await session.call('manage_assistant_operation', {
      action: 'create',
      operation_type: 'send_followup',
      total_items: 6,
      item_ids: ids(6),
      batch_size: 3,
      execution: 'assistant',
    });
    const operationId = String(created.json.operation_id);
    const progress = await session.call('manage_assistant_operation', {
      action: 'progress',
      operation_id: operationId,
    });
    const batch = progress.json.batch as string[];
    await session.call('manage_assistant_operation', {
      action: 'update',
      operation_id: operationId,
      completed_ids: batch.slice(0, 2),
      failed: [{ id: batch[2], reason: '<b>no phone</b>' }],
    });
    const shown = await session.call('manage_assistant_operation', { action: 'get', operation_id: operationId });

    const resource = await session.client.readResource({ uri: 'ui://opspad/operation.html' });
    const content = resource.contents[0] as { mimeType?: string; text: string };
    expect(content.mimeType).toBe('text/html;profile=mcp-app');

    const page = await browser.newPage();
    const violations: string[] = [];
    page.on('console', (message) => {
      if (/Content Security Policy|Refused to/i.test(message.text())) {
        violations.push(message.text());
      }
    });
    const elsewhere: string[] = [];
    // The host and the view are two origins of their own, served from here; anything else asked for is a leak.
    await page.route('**/*', (route) => {
      const url = route.request().url();
      if (url === `${HOST}/host.html`) {
        return route.fulfill({ contentType: 'text/html', body: HOST_PAGE });
      }
      if (url === `${VIEW}/operation.html`) {
        return route.fulfill({ contentType: 'text/html', body: content.text });
      }
      elsewhere.push(url);
      return route.abort();
    });

    // The host side: ext-apps' AppBridge, forwarding the view's tool calls to /mcp.
    const toBridge: Transport = {
      async start() {},
      async send(message: JSONRPCMessage) {
        // Runs in the page: its global is the host window.
        await page.evaluate((m) => (globalThis as unknown as { toView(m: unknown): void }).toView(m), message);
      },
      async close() {},
    };
    await page.exposeFunction('toHost', (message: JSONRPCMessage) => toBridge.onmessage?.(message));
    const bridge = new AppBridge(session.client, { name: 'opspad-test-host', version: '0' }, { serverTools: {} });
    const initialized = new Promise<void>((resolve) => {
      bridge.oninitialized = () => resolve();
    });
    await bridge.connect(toBridge);
    await page.goto(`${HOST}/host.html`);
    await initialized;
    await bridge.sendToolInput({ arguments: { action: 'get', operation_id: operationId } });
    await bridge.sendToolResult(shown.result as CallToolResult);

    const view = page.frameLocator('#view');
    await view.locator('#completed', { hasText: /^2$/ }).waitFor({ timeout: 60_000 });
    expect(await view.locator('#failed').textContent()).toBe('1');
    expect(await view.locator('#remaining').textContent()).toBe('3');
    expect(await view.locator('#total').textContent()).toBe('6');
    expect(await view.locator('#status').textContent()).toBe('active');
    // A reason is text, never markup.
    expect(await view.locator('#failures li').first().textContent()).toBe(`${batch[2]}: <b>no phone</b>`);
    expect(await view.locator('#failures b').count()).toBe(0);

    await view.locator('#pause:not([disabled])').click();
    await view.locator('#status', { hasText: /^paused$/ }).waitFor({ timeout: 60_000 });
    const [row] = await harness.db.query<{ status: string }>('SELECT status FROM assistant_operation WHERE id = $1', [
      operationId,
    ]);
    expect(row?.status).toBe('paused');
    expect(await view.locator('#resume').isDisabled()).toBe(false);

    expect(violations).toEqual([]);
    expect(elsewhere).toEqual([]);
    mkdirSync(ARTIFACTS, { recursive: true });
    await page.locator('#view').screenshot({ path: join(ARTIFACTS, 'mcp-app.png') });
    await page.close();
  });
});
