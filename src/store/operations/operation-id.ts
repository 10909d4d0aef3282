/** Operation ids. */
import { randomBytes } from 'node:crypto';

/**
 * A time-ordered (version 7) UUID, the id of every new operation. A new operation's item keys,
 * (operation_id, ordinal) and (operation_id, item_id), then sort after those of every operation
 * created before it, so a million inserts append at the right edge of both B-trees (Postgres'
 * fast path for rightmost inserts, and page splits that leave full pages) instead of splitting
 * pages in the middle of indexes that no longer fit in memory. Operations used to get random
 * ids but for a streamed create, so a large create landed among the small ones' keys and
 * split pages all over both indexes.
 */
export function timeOrderedUuid(now = Date.now()): string {
  const bytes = randomBytes(16);
  bytes.writeUIntBE(now, 0, 6);
  bytes[6] = ((bytes[6] as number) & 0x0f) | 0x70;
  bytes[8] = ((bytes[8] as number) & 0x3f) | 0x80;
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
