import { defineConfig } from 'vitest/config';

/**
 * Two projects, each test file in exactly one. `unit` needs no database, no Redis and no build
 * (`npm run test:unit`, seconds); `integration` is everything else, after the global setup builds
 * dist/ and creates the run's own migrated database and queue prefix. `npm test` runs both.
 */
const UNIT = ['src/**/*.test.ts', 'test/docs/**/*.test.ts'];
/** Under UNIT's folders but needing a service or dist/. */
const UNIT_EXCEPTIONS = [
  'src/handlers/types.test.ts',
  'src/queue/pglite-pool.test.ts',
  'src/queue/redis-target.test.ts',
];
/**
 * The fault-injection scenarios have their own run (npm run test:faults); test/frameworks/ runs
 * on its own Node 22 (test/integration/frameworks-current.test.ts starts it).
 */
const ALWAYS_EXCLUDED = ['**/node_modules/**', 'test/faults/**', 'test/frameworks/**'];

/**
 * Test files run side by side, each integration file on its own copy of the run's database and
 * under its own queue prefix (test/helpers/file-database.ts). Most of their time is spent
 * waiting on processes, servers and the network, so three run at once even on two cores.
 * OPSPAD_TEST_WORKERS sets another number.
 */
const TEST_WORKERS = testWorkers(process.env.OPSPAD_TEST_WORKERS);

function testWorkers(setting: string | undefined): number {
  const workers = Number(setting ?? 3);
  if (!Number.isInteger(workers) || workers < 1) {
    throw new Error(`OPSPAD_TEST_WORKERS must be a whole number of test files at once, 1 or more (got "${setting}")`);
  }
  return workers;
}

export default defineConfig({
  test: {
    maxWorkers: TEST_WORKERS,
    testTimeout: 60_000,
    hookTimeout: 60_000,
    reporters: ['default', ['json', { outputFile: '.test-results/vitest.json' }]],
    projects: [
      {
        extends: true,
        test: {
          name: 'unit',
          include: UNIT,
          exclude: [...ALWAYS_EXCLUDED, ...UNIT_EXCEPTIONS],
        },
      },
      {
        extends: true,
        test: {
          name: 'integration',
          include: ['test/**/*.test.ts', ...UNIT_EXCEPTIONS],
          exclude: [...ALWAYS_EXCLUDED, 'test/docs/**'],
          globalSetup: ['./test/helpers/build.ts', './test/helpers/global-setup.ts'],
          setupFiles: ['./test/helpers/file-setup.ts'],
        },
      },
    ],
  },
});
