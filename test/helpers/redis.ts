/** Redis housekeeping for tests: every key a run creates starts with the run's prefix. */
import { inject } from 'vitest';
import { fileQueuePrefix } from './file-database.ts';
import { deleteKeysWithPrefix } from './redis-keys.ts';

/** Deletes every key starting with `prefix` (one opspad's queues: Redis "flushed" for it). */
export function deleteQueueKeys(prefix: string, redisUrl = inject('redisUrl')): Promise<number> {
  return deleteKeysWithPrefix(redisUrl, prefix);
}

/** A Redis key under the run's prefix, so the run's teardown removes it. */
export function testKey(name: string): string {
  return `${fileQueuePrefix()}-${name}-${Math.random().toString(36).slice(2, 10)}`;
}
