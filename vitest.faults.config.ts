import { defineConfig } from 'vitest/config';

/** `npm run test:faults`: the fault-injection scenarios, one at a time (they start processes). */
export default defineConfig({
  test: {
    include: ['test/faults/**/*.test.ts'],
    globalSetup: ['./test/helpers/build.ts', './test/helpers/global-setup.ts'],
    setupFiles: ['./test/helpers/file-setup.ts'],
    fileParallelism: false,
    testTimeout: 300_000,
    hookTimeout: 120_000,
    reporters: ['default', ['json', { outputFile: '.test-results/faults.json' }]],
  },
});
