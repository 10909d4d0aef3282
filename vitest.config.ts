import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['src/**/*.test.ts', 'test/**/*.test.ts'],
    // The fault-injection scenarios have their own run (npm run test:faults).
    exclude: ['**/node_modules/**', 'test/faults/**'],
    globalSetup: ['./test/helpers/build.ts', './test/helpers/global-setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    reporters: ['default', ['json', { outputFile: '.test-results/vitest.json' }]],
  },
});
