/**
 * A migrated Postgres database of a test's own, beside its file's. For tests whose child
 * processes run reconcilers: a reconciler adopts every active background operation in its
 * database, so on the file's database it would take the file's other operations into its own
 * queues and run them with its own handlers.
 */
import { type CopiedDatabase, copyRunDatabase } from './file-database.ts';

export type PrivateDatabase = CopiedDatabase;

export function privatePostgresDatabase(tag: string): Promise<PrivateDatabase> {
  return copyRunDatabase(tag);
}
