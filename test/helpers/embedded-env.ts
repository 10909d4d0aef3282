/**
 * The settings a test passes to `createOpspad` as its `env`: the file's own database, the run's
 * Redis, a queue prefix of its own, a free port on loopback, no log lines.
 */
import { inject } from 'vitest';
import { fileDatabaseUrl } from './file-database.ts';
import { harnessPrefix } from './harness.ts';

export const embeddedEnv = (): Record<string, string> => ({
  DATABASE_URL: fileDatabaseUrl(),
  REDIS_URL: inject('redisUrl'),
  OPSPAD_QUEUE_PREFIX: harnessPrefix(),
  HOST: '127.0.0.1',
  PORT: '0',
  OPSPAD_LOG_LEVEL: 'silent',
});
