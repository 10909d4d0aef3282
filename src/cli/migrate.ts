/** `opspad migrate`: opspad's tables and, on the Postgres queue backend, BullMQ's schema. */
import { migrateQueueBackend } from '../queue/open-queue-backend.ts';
import { openForCommand } from './local-service.ts';
import { settingsFor } from './settings.ts';

export async function migrate(): Promise<number> {
  const config = settingsFor('migrate');
  const db = await openForCommand(config);
  try {
    const queue = await migrateQueueBackend(config, db);
    process.stdout.write(`Migrations applied (${db.engine}${queue ? `; queue: ${queue}` : ''}).\n`);
  } finally {
    await db.close();
  }
  return 0;
}
