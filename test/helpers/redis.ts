/** Redis housekeeping for tests: every key a run creates starts with the run's prefix. */
import { Redis } from 'ioredis';
import { inject } from 'vitest';

/** Deletes every key starting with `prefix` (one opspad's queues: Redis "flushed" for it). */
export async function deleteQueueKeys(prefix: string, redisUrl = inject('redisUrl')): Promise<number> {
  const redis = new Redis(redisUrl);
  let deleted = 0;
  try {
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
      cursor = next;
      if (keys.length > 0) {
        deleted += await redis.del(...keys);
      }
    } while (cursor !== '0');
  } finally {
    redis.disconnect();
  }
  return deleted;
}

/** A Redis key under the run's prefix, so the run's teardown removes it. */
export function testKey(name: string): string {
  return `${inject('queuePrefix')}-${name}-${Math.random().toString(36).slice(2, 10)}`;
}
