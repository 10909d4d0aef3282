/**
 * Each test file's own Postgres database and queue prefix, so test files run side by side.
 *
 * The run's global setup migrates one database (test/helpers/global-setup.ts); the setup file
 * (test/helpers/file-setup.ts) copies it for each test file (`CREATE DATABASE … TEMPLATE`,
 * a fraction of a second) and drops the copy at the file's end. A file's reconciler then adopts
 * only its own operations, and a file's sweep or count sees only its own rows. Nothing
 * connects to the run's database itself: a copy needs its template unused.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { inject } from 'vitest';
import { deleteKeysWithPrefix } from './redis-keys.ts';

interface FileResources {
  databaseUrl: string;
  queuePrefix: string;
}

let resources: FileResources | undefined;

function current(): FileResources {
  if (!resources) {
    throw new Error('test/helpers/file-setup.ts did not run: add it to the config’s setupFiles');
  }
  return resources;
}

/** The test file's own migrated database. */
export function fileDatabaseUrl(): string {
  return current().databaseUrl;
}

/** The test file's own BullMQ prefix, under the run's (the run's teardown removes its keys). */
export function fileQueuePrefix(): string {
  return current().queuePrefix;
}

/** A client on the server's maintenance database, for creating and dropping databases. */
export async function adminClient(): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: inject('serverUrl') });
  await client.connect();
  return client;
}

/** A database URL on the run's server with `name` as its database. */
export function databaseUrlNamed(name: string): string {
  const url = new URL(inject('serverUrl'));
  url.pathname = `/${name}`;
  return url.toString();
}

export interface CopiedDatabase {
  url: string;
  drop(): Promise<void>;
}

/**
 * A copy of the run's migrated database, named after the run (its teardown drops any copy a
 * killed worker left behind).
 */
export async function copyRunDatabase(tag: string): Promise<CopiedDatabase> {
  const name = `${inject('templateDatabase')}_${tag}_${randomBytes(4).toString('hex')}`;
  const admin = await adminClient();
  try {
    await admin.query(`CREATE DATABASE ${name} TEMPLATE ${inject('templateDatabase')}`);
  } finally {
    await admin.end();
  }
  return {
    url: databaseUrlNamed(name),
    async drop() {
      const dropper = await adminClient();
      try {
        await dropper.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await dropper.end();
      }
    },
  };
}

/** Copies the run's database for this test file; the returned function drops it again. */
export async function openFileResources(): Promise<() => Promise<void>> {
  const database = await copyRunDatabase('f');
  const queuePrefix = `${inject('queuePrefix')}-${randomBytes(4).toString('hex')}`;
  resources = { databaseUrl: database.url, queuePrefix };
  return async () => {
    await database.drop();
    await deleteKeysWithPrefix(inject('redisUrl'), queuePrefix);
  };
}
