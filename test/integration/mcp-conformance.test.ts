/**
 * The official MCP conformance suite (`@modelcontextprotocol/conformance`, on Node 22) against
 * `/mcp`, through a proxy that adds an API key (the suite sends none) and passes Host and Origin
 * through, with OPSPAD_PUBLIC_URL set to the proxy's address as behind a gateway. Every scenario
 * that applies to a server with opspad's tools runs; the others need the suite's own test tools,
 * prompts or logging. Each scenario's report is kept under .test-results/mcp-conformance/, and a
 * check that does not succeed fails the test.
 */

import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiKey } from '../../src/store/index.ts';
import {
  CONFORMANCE_SETUP_TIMEOUT_MS,
  ensureConformanceSuite,
  runConformanceScenario,
} from '../helpers/conformance-suite.ts';
import { type Harness, startHarness } from '../helpers/harness.ts';
import { type KeyProxy, startKeyProxy } from '../helpers/key-proxy.ts';

const SCENARIOS = [
  'server-initialize',
  'ping',
  'tools-list',
  'resources-list',
  'dns-rebinding-protection',
  'server-sse-multiple-streams',
];

describe('the MCP conformance suite against /mcp', () => {
  let harness: Harness;
  let proxy: KeyProxy;
  let apiKey = '';

  beforeAll(async () => {
    ensureConformanceSuite();
    // The proxy's address is the public one: it is known before opspad starts.
    proxy = await startKeyProxy(() => apiKey);
    harness = await startHarness('postgres', { env: { OPSPAD_PUBLIC_URL: proxy.url } });
    apiKey = (await createApiKey(harness.db, `org-${randomUUID()}`)).api_key;
    proxy.target = harness.url;
  }, CONFORMANCE_SETUP_TIMEOUT_MS);

  afterAll(async () => {
    await proxy?.close();
    await harness?.close();
  });

  for (const scenario of SCENARIOS) {
    // One run starts a Node 22 process and the suite: about 5 s alone, 40 s on a busy machine.
    it(`passes ${scenario}`, { timeout: 180_000 }, async () => {
      const { checks, exitCode, output } = await runConformanceScenario(`${proxy.url}/mcp`, scenario);
      expect(checks.length, output).toBeGreaterThan(0);
      const failed = checks.filter((check) => check.status !== 'SUCCESS' && check.status !== 'INFO');
      expect(failed, output).toEqual([]);
      expect(exitCode, output).toBe(0);
    });
  }
});
