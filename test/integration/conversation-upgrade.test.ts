/**
 * The upgrade to conversations per organization (drizzle/NNNN_conversation_per_organization), on
 * real Postgres and on PGlite: a database migrated to the migration before it (as the previous
 * opspad left it) is filled with rows of every conversation table, then migrated to head. Every
 * row is still there and still readable through the repositories; pad versions took their pad's
 * organization; a row an earlier database held under another organization's conversation now
 * belongs to a conversation of its own organization; one active operation per conversation still
 * holds; and the composite foreign keys cascade.
 */
import { randomUUID } from 'node:crypto';
import { rmSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createOperation,
  getPad,
  listOpenOperations,
  listPadVersions,
  type OpspadDatabase,
  runMigrations,
} from '../../src/store/index.ts';
import { ENGINES } from '../helpers/harness.ts';
import { migrationsBefore, openEmptyDatabase } from '../helpers/upgrade.ts';

const UPGRADE = /^\d{4}_conversation_per_organization$/;

interface Ids {
  orgA: string;
  orgB: string;
  /** A's conversation, holding rows of every table. */
  shared: string;
  /** B's own conversation. */
  ownB: string;
  active: string;
  paused: string;
  /** An operation of B's that an earlier database held under A's conversation `shared`. */
  stray: string;
  execution: string;
}

/** Rows of every conversation table, written as the previous schema allowed. */
async function fillPreviousSchema(db: OpspadDatabase): Promise<Ids> {
  const ids: Ids = {
    orgA: randomUUID(),
    orgB: randomUUID(),
    shared: randomUUID(),
    ownB: randomUUID(),
    active: randomUUID(),
    paused: randomUUID(),
    stray: randomUUID(),
    execution: randomUUID(),
  };
  const run = (sql: string, params: unknown[]) => db.query(sql, params);
  await run('INSERT INTO organization (id, name) VALUES ($1, $2), ($3, $4)', [
    ids.orgA,
    `upgrade-a-${ids.orgA}`,
    ids.orgB,
    `upgrade-b-${ids.orgB}`,
  ]);
  await run('INSERT INTO assistant_conversation (id, organization_id) VALUES ($1, $2), ($3, $4)', [
    ids.shared,
    ids.orgA,
    ids.ownB,
    ids.orgB,
  ]);
  const operation = `INSERT INTO assistant_operation
      (id, conversation_id, organization_id, operation_type, status, total_items, state_json)
    VALUES ($1, $2, $3, $4, $5, 2, '{"cursor":0,"batch_size":5,"execution":"assistant"}'::jsonb)`;
  await run(operation, [ids.active, ids.shared, ids.orgA, 'send_sms', 'active']);
  await run(operation, [ids.paused, ids.shared, ids.orgA, 'tag_contacts', 'paused']);
  await run(operation, [ids.stray, ids.shared, ids.orgB, 'stray_work', 'paused']);
  for (const operationId of [ids.active, ids.paused, ids.stray]) {
    await run(
      `INSERT INTO assistant_operation_item (operation_id, ordinal, item_id) VALUES ($1, 0, 'i-1'), ($1, 1, 'i-2')`,
      [operationId],
    );
  }
  await run('INSERT INTO assistant_execution (id, conversation_id, organization_id) VALUES ($1, $2, $3)', [
    ids.execution,
    ids.shared,
    ids.orgA,
  ]);
  await run(
    `INSERT INTO scratchpad_note (conversation_id, organization_id, execution_id, persistent, text)
     VALUES ($1, $2, $3, false, 'a note'), ($1, $2, NULL, true, 'a standing note')`,
    [ids.shared, ids.orgA, ids.execution],
  );
  await run(
    `INSERT INTO scratchpad_trace (conversation_id, organization_id, execution_id, kind, notes)
     VALUES ($1, $2, $3, 'write', 'a note')`,
    [ids.shared, ids.orgA, ids.execution],
  );
  const pad = JSON.stringify({ goals: [{ text: 'upgrade' }], open_items: [], facts: [], refs: [] });
  await run(`INSERT INTO scratchpad (conversation_id, organization_id, version, pad) VALUES ($1, $2, 2, $3::jsonb)`, [
    ids.shared,
    ids.orgA,
    pad,
  ]);
  await run(
    `INSERT INTO scratchpad_version (conversation_id, version, pad, source, reason)
     VALUES ($1, 1, $2::jsonb, 'api', 'first'), ($1, 2, $2::jsonb, 'api', 'second')`,
    [ids.shared, pad],
  );
  await run(
    `INSERT INTO scratchpad_event (conversation_id, organization_id, kind, status) VALUES ($1, $2, 'reorganization', 'reorganized')`,
    [ids.shared, ids.orgA],
  );
  await run(
    `INSERT INTO context_render (conversation_id, organization_id, pad_version, chars, sha256) VALUES ($1, $2, 2, 10, 'x')`,
    [ids.shared, ids.orgA],
  );
  return ids;
}

describe.each(ENGINES)('upgrading to conversations per organization on %s', (engine) => {
  let db: OpspadDatabase;
  let drop: () => Promise<void>;
  let ids: Ids;
  let folder: string;

  beforeAll(async () => {
    ({ db, drop } = await openEmptyDatabase(engine));
    folder = migrationsBefore(UPGRADE);
    await runMigrations(db, { migrationsFolder: folder });
    ids = await fillPreviousSchema(db);
    await runMigrations(db);
  });
  afterAll(async () => {
    rmSync(folder, { recursive: true, force: true });
    await drop?.();
  });

  it('keeps every row, each in a conversation of its own organization', async () => {
    const conversations = await db.query<{ organization_id: string; id: string }>(
      'SELECT organization_id, id FROM assistant_conversation WHERE organization_id = ANY($1::uuid[])',
      [[ids.orgA, ids.orgB]],
    );
    expect(conversations).toHaveLength(3);
    expect(conversations).toEqual(
      expect.arrayContaining([
        { organization_id: ids.orgA, id: ids.shared },
        { organization_id: ids.orgB, id: ids.ownB },
        // The stray operation's own organization now has a conversation with that id.
        { organization_id: ids.orgB, id: ids.shared },
      ]),
    );
    const counts = await db.query<Record<string, number>>(
      `SELECT (SELECT count(*)::int FROM assistant_operation_item WHERE operation_id = ANY($1::uuid[])) AS items,
              (SELECT count(*)::int FROM scratchpad_note WHERE conversation_id = $2) AS notes,
              (SELECT count(*)::int FROM scratchpad_trace WHERE conversation_id = $2) AS traces,
              (SELECT count(*)::int FROM scratchpad_event WHERE conversation_id = $2) AS events,
              (SELECT count(*)::int FROM context_render WHERE conversation_id = $2) AS renders`,
      [[ids.active, ids.paused, ids.stray], ids.shared],
    );
    expect(counts[0]).toEqual({ items: 6, notes: 2, traces: 1, events: 1, renders: 1 });
    const versions = await db.query<{ organization_id: string; version: number }>(
      'SELECT organization_id, version FROM scratchpad_version WHERE conversation_id = $1 ORDER BY version',
      [ids.shared],
    );
    expect(versions).toEqual([
      { organization_id: ids.orgA, version: 1 },
      { organization_id: ids.orgA, version: 2 },
    ]);
  });

  it('reads the old rows through the repositories, each organization its own', async () => {
    const a = { organizationId: ids.orgA, conversationId: ids.shared };
    const b = { organizationId: ids.orgB, conversationId: ids.shared };
    expect((await listOpenOperations(db, a, 10)).operations.map((o) => o.id).sort()).toEqual(
      [ids.active, ids.paused].sort(),
    );
    expect((await listOpenOperations(db, b, 10)).operations.map((o) => o.id)).toEqual([ids.stray]);
    expect((await getPad(db, a)).version).toBe(2);
    expect((await getPad(db, b)).version).toBe(0);
    expect((await listPadVersions(db, a, 100, 10)).map((v) => v.version)).toEqual([2, 1]);
    expect(await listPadVersions(db, b, 100, 10)).toEqual([]);
  });

  it('still refuses a second active operation in one conversation, and allows one per organization', async () => {
    await expect(
      db.query(
        `INSERT INTO assistant_operation (conversation_id, organization_id, operation_type, status, total_items)
         VALUES ($1, $2, 'second', 'active', 1)`,
        [ids.shared, ids.orgA],
      ),
    ).rejects.toThrow(/uq_assistant_operation_one_active/);
    const { operation } = await createOperation(
      db,
      { organizationId: ids.orgB, conversationId: ids.shared },
      {
        operationType: 'b_work',
        itemIds: ['b-1'],
        batchSize: 5,
        queryParams: null,
        notes: null,
        execution: 'assistant',
        actor: 'test',
      },
    );
    const active = await db.query<{ organization_id: string }>(
      `SELECT organization_id FROM assistant_operation WHERE conversation_id = $1 AND status = 'active'
       ORDER BY organization_id`,
      [ids.shared],
    );
    expect(active.map((r) => r.organization_id)).toEqual([ids.orgA, ids.orgB].sort());
    expect(operation.organization_id).toBe(ids.orgB);
  });

  it('deletes a conversation with everything in it, and nothing of the other organization', async () => {
    await db.query('DELETE FROM assistant_conversation WHERE organization_id = $1 AND id = $2', [ids.orgA, ids.shared]);
    const left = await db.query<{ organization_id: string; n: number }>(
      `SELECT organization_id, count(*)::int AS n FROM (
         SELECT organization_id FROM assistant_operation WHERE conversation_id = $1
         UNION ALL SELECT organization_id FROM assistant_execution WHERE conversation_id = $1
         UNION ALL SELECT organization_id FROM scratchpad_note WHERE conversation_id = $1
         UNION ALL SELECT organization_id FROM scratchpad_trace WHERE conversation_id = $1
         UNION ALL SELECT organization_id FROM scratchpad WHERE conversation_id = $1
         UNION ALL SELECT organization_id FROM scratchpad_version WHERE conversation_id = $1
         UNION ALL SELECT organization_id FROM scratchpad_event WHERE conversation_id = $1
         UNION ALL SELECT organization_id FROM context_render WHERE conversation_id = $1
       ) rows GROUP BY organization_id`,
      [ids.shared],
    );
    // B's two operations (the stray one and the one created above) are all that is left.
    expect(left).toEqual([{ organization_id: ids.orgB, n: 2 }]);
    const items = await db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM assistant_operation_item WHERE operation_id = ANY($1::uuid[])',
      [[ids.active, ids.paused]],
    );
    expect(items[0]?.n).toBe(0);
  });
});
