/**
 * The adapters' own tests (test/integration/ai-sdk.test.ts, openai-agents.test.ts) run again with
 * `ai` and `@openai/agents` at the versions of this folder's lockfile, on this folder's Node 22
 * (test/integration/frameworks-current.test.ts starts it). Every import of either package,
 * opspad's adapters' included, goes to this folder's copy.
 */
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

const here = fileURLToPath(new URL('.', import.meta.url));
const entry = (specifier: string) => fileURLToPath(import.meta.resolve(specifier));

export default defineConfig({
  root: join(here, '../..'),
  resolve: {
    alias: [
      { find: /^ai$/, replacement: entry('ai') },
      { find: /^ai\/test$/, replacement: entry('ai/test') },
      { find: /^@openai\/agents$/, replacement: entry('@openai/agents') },
    ],
  },
  test: {
    testTimeout: 60_000,
    hookTimeout: 60_000,
    include: [
      'test/frameworks/versions.test.ts',
      'test/integration/ai-sdk.test.ts',
      'test/integration/openai-agents.test.ts',
    ],
    globalSetup: ['./test/helpers/global-setup.ts'],
    setupFiles: ['./test/helpers/file-setup.ts'],
    reporters: ['default', ['json', { outputFile: '.test-results/frameworks-current.json' }]],
  },
});
