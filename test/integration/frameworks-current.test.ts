/**
 * `opspad/ai-sdk` and `opspad/openai-agents` against `ai` 7 and `@openai/agents` 0.20 — the
 * versions a user installs today, which need Node 22 — on that Node: the adapters' own tests
 * (ai-sdk.test.ts, openai-agents.test.ts: each library's real agent loop, a model that keeps only
 * the system prompt and its last message, a 100-item follow-up with exact counts) run again with
 * every import of either library sent to test/frameworks/'s copy, and a first test checks the
 * Node and the versions loaded.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { ensureFrameworks, FRAMEWORKS_SETUP_TIMEOUT_MS, runFrameworksTests } from '../helpers/frameworks-current.ts';

describe('the adapters against ai 7 and @openai/agents 0.20 on Node 22', () => {
  beforeAll(() => {
    ensureFrameworks();
  }, FRAMEWORKS_SETUP_TIMEOUT_MS);

  // Two agent loops of 100 items and a harness each: about 30 s alone, more on a busy machine.
  it('finishes the 100-item follow-up in both loops with exact counts', { timeout: 300_000 }, async () => {
    const { code, output, report } = await runFrameworksTests();
    expect(code, output.slice(-4000)).toBe(0);
    const passed = report.testResults.flatMap((file) =>
      file.assertionResults.filter((test) => test.status === 'passed').map((test) => test.title),
    );
    expect(report.numFailedTests).toBe(0);
    expect(passed).toContain('runs on Node 22 with ai 7 and @openai/agents 0.20');
    expect(
      passed.filter(
        (title) =>
          title === 'finishes a 100-item follow-up with a model that keeps only the system prompt and its last message',
      ),
    ).toHaveLength(2);
  });
});
