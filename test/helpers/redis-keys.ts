/**
 * Deletes every Redis key starting with a prefix. Free of vitest, so the benchmark (which runs
 * outside it) removes its keys with the same code as the tests.
 */
import { Redis } from 'ioredis';

export async function deleteKeysWithPrefix(redisUrl: string, prefix: string): Promise<number> {
  const redis = new Redis(redisUrl, { maxRetriesPerRequest: 1 });
  let deleted = 0;
  try {
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
      cursor = next;
      if (keys.length > 0) {
        deleted += await redis.unlink(...keys);
      }
    } while (cursor !== '0');
  } finally {
    redis.disconnect();
  }
  return deleted;
}
