/**
 * Statements planned once per connection (src/store/db/prepared.ts): on a direct connection the
 * marked statements of an assistant's turn run by name and settle on a generic plan; statements
 * over an operation's items stay unnamed; through a pooler (DATABASE_DIRECT_URL set) nothing is
 * named.
 */
import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import {
  createApiKey,
  createPostgresDatabase,
  leaseBatch,
  type OpspadDatabase,
  recordResults,
} from '../../src/store/index.ts';
import { buildContextFragment } from '../../src/tools/context-fragment.ts';
import { fileDatabaseUrl } from '../helpers/file-database.ts';
import { newStoreOperation } from '../helpers/harness.ts';

const BUDGETS = { reciteChars: 4_000, maxTokens: 1_500 };

describe('prepared statements on postgres', () => {
  const opened: OpspadDatabase[] = [];
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((db) => db.close()));
  });

  /** One connection, so the session that prepared a statement is the one asked about it. */
  const oneConnection = (options: { behindPooler: boolean }) => {
    const url = fileDatabaseUrl();
    const db = createPostgresDatabase({
      connectionString: url,
      poolSize: 1,
      ...(options.behindPooler ? { directConnectionString: url } : {}),
    });
    opened.push(db);
    return db;
  };

  /** A conversation's turns: context reads, then a lease and a record of each batch. */
  const turns = async (db: OpspadDatabase) => {
    const { scope, operationId } = await newStoreOperation(db, 40, 5);
    for (let turn = 0; turn < 8; turn++) {
      await buildContextFragment(db, scope, BUDGETS);
      const lease = await leaseBatch(db, scope, { operationId, owner: 'assistant', leaseSeconds: 300 });
      await recordResults(db, scope, { operationId, completedIds: lease.batch, failed: [], owner: 'assistant' });
    }
  };

  const preparedHere = (db: OpspadDatabase) =>
    db.query<{ name: string; statement: string; generic_plans: number; custom_plans: number }>(
      `SELECT name, statement, generic_plans::int AS generic_plans, custom_plans::int AS custom_plans
       FROM pg_prepared_statements ORDER BY name`,
    );

  it('runs the marked statements by name, and they settle on a generic plan', async () => {
    const db = oneConnection({ behindPooler: false });
    await turns(db);
    const statements = await preparedHere(db);
    const find = (fragment: string) => statements.find((s) => s.statement.includes(fragment));
    for (const fragment of ['opspad_lease_step', 'opspad_record_step', 'AS conversation_exists']) {
      const statement = find(fragment);
      expect(statement?.name, fragment).toMatch(/^opspad_[0-9a-f]{20}$/);
      // Eight runs: the first five planned for their parameters, then the cached generic plan.
      expect(statement?.generic_plans, fragment).toBeGreaterThan(0);
    }
    // The general path's statements over an operation's items are planned for their parameters.
    expect(
      statements.filter(
        (s) => s.statement.includes('assistant_operation_item') && !s.statement.includes('AS paused_operation_id'),
      ),
    ).toEqual([]);
  });

  it('names nothing through a pooler in transaction mode', async () => {
    const db = oneConnection({ behindPooler: true });
    await turns(db);
    expect(await preparedHere(db)).toEqual([]);
    // The turns were served all the same.
    const { organization_id } = await createApiKey(db, `org-${randomUUID()}`);
    const fragment = await buildContextFragment(
      db,
      { organizationId: organization_id, conversationId: randomUUID() },
      BUDGETS,
    );
    expect(fragment.operations).toEqual([]);
  });
});
