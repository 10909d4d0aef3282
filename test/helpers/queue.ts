/**
 * Queue-backend housekeeping for tests: losing every job of one opspad, whichever backend holds
 * them, as a flushed Redis or an emptied queue schema would.
 */

import type { QueueBackend } from '../../src/queue/backend.ts';
import type { Queryable } from '../../src/store/db/db.ts';
import { deleteQueueKeys } from './redis.ts';

/**
 * Every job of `backend`'s deployment gone: its Redis keys deleted, or every table of its queue
 * schema emptied (BullMQ's migration ledger kept, as a restored-empty database would). `db` is
 * a connection to the database the Postgres backend runs on.
 */
export async function loseEveryJob(backend: QueueBackend, db: Queryable): Promise<void> {
  if (backend.kind === 'redis') {
    await deleteQueueKeys(backend.namespace);
    return;
  }
  const tables = await db.query<{ name: string }>(
    `SELECT format('%I.%I', schemaname, tablename) AS name FROM pg_tables WHERE schemaname = $1 AND tablename <> 'migration'`,
    [backend.namespace],
  );
  await db.query(`TRUNCATE ${tables.map((t) => t.name).join(', ')} CASCADE`);
}
