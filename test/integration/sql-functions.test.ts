/**
 * Each server-side function has one home, its file under src/store/<folder>/sql/: a freshly
 * migrated database, on Postgres and on PGlite, holds exactly the files' functions with exactly
 * their definitions (`pg_get_functiondef`, whitespace aside), and a migration run puts back a
 * function that differs from its file.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  functionsToApply,
  LIST_FUNCTIONS_SQL,
  normalizeFunctionDef,
  sqlFunctionFiles,
} from '../../src/store/db/sql-functions.ts';
import { createPgliteDatabase, createPostgresDatabase, runMigrations } from '../../src/store/index.ts';
import { type PrivateDatabase, privatePostgresDatabase } from '../helpers/private-database.ts';

interface FunctionRow {
  name: string;
  definition: string;
}

function expectFilesMatch(rows: readonly FunctionRow[]): void {
  const files = sqlFunctionFiles();
  expect(rows.map((row) => row.name)).toEqual(files.map((file) => file.name));
  for (const file of files) {
    const row = rows.find((candidate) => candidate.name === file.name) as FunctionRow;
    expect(normalizeFunctionDef(row.definition), file.path).toBe(normalizeFunctionDef(file.text));
  }
  expect(functionsToApply(rows)).toEqual([]);
}

describe('the function files', () => {
  it('are twenty-one, each a CREATE OR REPLACE of the function its file is named for', () => {
    const files = sqlFunctionFiles();
    expect(files.map((file) => file.name)).toEqual([
      'opspad_assert_background_capacity',
      'opspad_count_open_operations',
      'opspad_create_operation',
      'opspad_cursor_forward',
      'opspad_delete_operation_items',
      'opspad_lease_from_cursor',
      'opspad_lease_items',
      'opspad_lease_step',
      'opspad_lease_usual',
      'opspad_lock_conversation',
      'opspad_needs_approval',
      'opspad_pause_active',
      'opspad_pending_items',
      'opspad_record_lease_step',
      'opspad_record_lease_steps',
      'opspad_record_owned',
      'opspad_record_step',
      'opspad_record_usual',
      'opspad_reserve_quota',
      'opspad_waiting_organizations',
      'opspad_write_lease',
    ]);
    for (const file of files) {
      expect(normalizeFunctionDef(file.text).startsWith(`CREATE OR REPLACE FUNCTION ${file.name}(`), file.path).toBe(
        true,
      );
    }
  });
});

describe('a freshly migrated Postgres database', () => {
  let database: PrivateDatabase;
  let client: pg.Client;

  beforeAll(async () => {
    database = await privatePostgresDatabase('functions');
    client = new pg.Client({ connectionString: database.url });
    await client.connect();
  });

  afterAll(async () => {
    await client?.end();
    await database?.drop();
  });

  it('holds exactly the files’ functions', async () => {
    const { rows } = await client.query<FunctionRow>(LIST_FUNCTIONS_SQL);
    expectFilesMatch(rows);
  });

  it('answers the record step as the release before called it, with six arguments', async () => {
    // Migration 0019 replaced it in one transaction with a seventh argument that defaults to false.
    const { rows } = await client.query(
      'SELECT * FROM opspad_record_step(gen_random_uuid(), gen_random_uuid(), gen_random_uuid(), $1, $2, NULL)',
      ['worker', ['a']],
    );
    expect(rows).toEqual([]); // no such operation: declined, nothing written
  });

  it('answers the record-and-lease steps as the release before called them, without the whole lease', async () => {
    // Migration 0021 replaced them in one transaction with a last argument that defaults to null.
    const single = await client.query(
      'SELECT * FROM opspad_record_lease_step(gen_random_uuid(), gen_random_uuid(), gen_random_uuid(), $1, $2, NULL, 300, NULL, NULL)',
      ['worker', ['a']],
    );
    const grouped = await client.query(
      `SELECT * FROM opspad_record_lease_steps(gen_random_uuid(), gen_random_uuid(), gen_random_uuid(), $1, $2, $3, NULL,
                                               300, ARRAY[NULL]::int[], NULL)`,
      [['worker'], [1], ['a']],
    );
    expect([single.rows, grouped.rows]).toEqual([[], []]); // no such operation: declined
  });

  it('inlines the SQL helpers where they are called, so no call plans their body again', async () => {
    // A SQL function is inlined only when its body is no more volatile than it says: a stable
    // call such as to_jsonb in an IMMUTABLE helper made every step call parse and plan it.
    const { rows } = await client.query<{ 'QUERY PLAN': string }>(
      `EXPLAIN VERBOSE SELECT opspad_cursor_forward(o.state_json, o.total_items),
                              opspad_record_usual(o.status, o.state_json, ARRAY['a'])
       FROM assistant_operation o`,
    );
    const plan = rows.map((row) => row['QUERY PLAN']).join('\n');
    expect(plan).toContain('jsonb_set(');
    expect(plan).not.toMatch(/opspad_(cursor_forward|record_usual)\(/);
  });

  it('gets a function back from its file when it differs or is missing', async () => {
    await client.query('DROP FUNCTION opspad_record_step(uuid, uuid, uuid, text, text[], text[], boolean)');
    await client.query(
      `CREATE OR REPLACE FUNCTION opspad_delete_operation_items() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$`,
    );
    const db = createPostgresDatabase({ connectionString: database.url, poolSize: 1 });
    try {
      await runMigrations(db);
    } finally {
      await db.close();
    }
    const { rows } = await client.query<FunctionRow>(LIST_FUNCTIONS_SQL);
    expectFilesMatch(rows);
  });
});

describe('a database a newer release has migrated', () => {
  it('keeps its functions when a process of an older release starts on it', async () => {
    const database = await privatePostgresDatabase('functions_newer');
    const client = new pg.Client({ connectionString: database.url });
    await client.connect();
    try {
      // The newer release's migration, and a function of its own beside ours.
      await client.query(
        `INSERT INTO drizzle.__drizzle_migrations (hash, created_at)
         SELECT 'a newer release', max(created_at) + 1 FROM drizzle.__drizzle_migrations`,
      );
      const newer = `CREATE OR REPLACE FUNCTION opspad_delete_operation_items() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$`;
      await client.query(newer);
      const db = createPostgresDatabase({ connectionString: database.url, poolSize: 1 });
      try {
        await runMigrations(db);
      } finally {
        await db.close();
      }
      const { rows } = await client.query<FunctionRow>(
        `SELECT proname AS name, pg_get_functiondef(oid) AS definition FROM pg_proc WHERE proname = 'opspad_delete_operation_items'`,
      );
      expect(rows[0]?.definition).toContain('RETURN NULL; END');

      // Once the process knows every migration the database applied, its files apply again.
      await client.query(`DELETE FROM drizzle.__drizzle_migrations WHERE hash = 'a newer release'`);
      const again = createPostgresDatabase({ connectionString: database.url, poolSize: 1 });
      try {
        await runMigrations(again);
      } finally {
        await again.close();
      }
      expectFilesMatch((await client.query<FunctionRow>(LIST_FUNCTIONS_SQL)).rows);
    } finally {
      await client.end();
      await database.drop();
    }
  });
});

describe('a freshly migrated PGlite database', () => {
  it('holds exactly the files’ functions', async () => {
    const db = await createPgliteDatabase();
    try {
      await runMigrations(db);
      const { rows } = await db.pglite.query<FunctionRow>(LIST_FUNCTIONS_SQL);
      expectFilesMatch(rows);
    } finally {
      await db.close();
    }
  });
});
