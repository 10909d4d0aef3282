/**
 * The context reads in flight share one statement (src/store/operations/context-reads.ts, batched.ts), and
 * each gets exactly what it would get alone: its own conversation's operations and nothing of
 * another's, in another organization or the same one.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOperation, type OpspadDatabase, type Queryable, readContextInputs } from '../../src/store/index.ts';
import { ENGINES, ids, newStoreOperation, openTestDatabase } from '../helpers/harness.ts';

describe.each(ENGINES)('context reads on %s', (engine) => {
  let db: OpspadDatabase;

  beforeAll(async () => {
    db = await openTestDatabase(engine);
  });
  afterAll(async () => {
    await db.close();
  });

  /** A handle of its own (so batches of its own), counting the statements it sends. */
  const countingHandle = () => {
    const sizes: number[] = [];
    const handle: Queryable = {
      query: (text, params) => {
        const first = (params ?? [])[0];
        sizes.push(Array.isArray(first) ? first.length : 1);
        return db.query(text, params);
      },
    };
    return { handle, sizes };
  };

  it('reads the conversations in flight in one statement, each getting only its own', async () => {
    // Conversations of three organizations, two in the same one, each with an operation of its own size.
    const scopes = [];
    for (const items of [3, 5, 7]) {
      scopes.push(await newStoreOperation(db, items, 2));
    }
    const sameOrganization = { ...(scopes[0] as (typeof scopes)[number]).scope, conversationId: randomUUID() };
    const { operation } = await createOperation(db, sameOrganization, {
      operationType: 'send_sms',
      itemIds: ids(9),
      batchSize: 2,
      queryParams: null,
      notes: null,
      execution: 'assistant',
      actor: 'test',
    });
    scopes.push({ scope: sameOrganization, operationId: operation.id });
    const alone = [];
    for (const { scope } of scopes) {
      alone.push(await readContextInputs(db, scope, 10));
    }
    expect(alone.map((inputs) => inputs.page.operations.map((op) => op.total_items))).toEqual([[3], [5], [7], [9]]);

    const { handle, sizes } = countingHandle();
    const together = await Promise.all(scopes.map(({ scope }) => readContextInputs(handle, scope, 10)));
    // The first goes alone; the three that came while it ran go together.
    expect(sizes).toEqual([1, 3]);
    expect(together).toEqual(alone);

    // A conversation nobody used, beside one that has an operation: each answers for itself.
    const unknown = {
      ...(scopes[0] as { scope: { organizationId: string } }).scope,
      conversationId: crypto.randomUUID(),
    };
    const [nothing, some] = await Promise.all([
      readContextInputs(handle, unknown, 10),
      readContextInputs(handle, (scopes[1] as (typeof scopes)[number]).scope, 10),
    ]);
    expect(nothing).toMatchObject({ exists: false, page: { operations: [] } });
    expect(some).toEqual(alone[1]);
  });
});
