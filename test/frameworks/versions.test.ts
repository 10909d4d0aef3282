/**
 * What this run loaded: Node 22, and the `ai` and `@openai/agents` of test/frameworks/ — the same
 * modules opspad's adapters import here (vitest.config.ts sends every import there).
 */
import { readFileSync } from 'node:fs';
import { Agent } from '@openai/agents';
import { generateText } from 'ai';
import { expect, it } from 'vitest';

const versionOf = (name: string) =>
  (
    JSON.parse(readFileSync(new URL(`node_modules/${name}/package.json`, import.meta.url), 'utf8')) as {
      version: string;
    }
  ).version;

it('runs on Node 22 with ai 7 and @openai/agents 0.20', async () => {
  expect(process.versions.node).toMatch(/^22\./);
  expect(versionOf('ai')).toMatch(/^7\./);
  expect(versionOf('@openai/agents')).toMatch(/^0\.20\./);
  // What `ai` and `@openai/agents` import is this folder's copy, not the project's.
  expect(generateText).toBe((await import(import.meta.resolve('ai'))).generateText);
  expect(Agent).toBe((await import(import.meta.resolve('@openai/agents'))).Agent);
});
