/**
 * Context-render records written together (src/store/scratchpads/render-log.ts): the reads in flight share
 * one INSERT, each answers only once its row is committed, and a row that cannot be written fails
 * only its own read.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type ConversationScope,
  createApiKey,
  ensureConversation,
  type OpspadDatabase,
  type Queryable,
  recordContextRender,
} from '../../src/store/index.ts';
import { ENGINES, openTestDatabase } from '../helpers/harness.ts';

describe.each(ENGINES)('context-render records on %s', (engine) => {
  let db: OpspadDatabase;

  beforeAll(async () => {
    db = await openTestDatabase(engine);
  });
  afterAll(async () => {
    await db.close();
  });

  /** A handle of its own (so a log of its own), counting the INSERTs it sends. */
  const countingHandle = () => {
    const inserts: number[] = [];
    const handle: Queryable = {
      query: (text, params) => {
        if (text.startsWith('INSERT INTO context_render')) {
          inserts.push(((params ?? [])[0] as unknown[]).length);
        }
        return db.query(text, params);
      },
    };
    return { handle, inserts };
  };

  const newConversations = async (n: number): Promise<ConversationScope[]> => {
    const { organization_id } = await createApiKey(db, `org-${randomUUID()}`);
    const scopes = Array.from({ length: n }, () => ({ organizationId: organization_id, conversationId: randomUUID() }));
    for (const scope of scopes) {
      await ensureConversation(db, scope, { lock: false });
    }
    return scopes;
  };

  const rowsOf = async (scope: ConversationScope) =>
    db.query<{ pad_version: number; chars: number; sha256: string }>(
      'SELECT pad_version, chars, sha256 FROM context_render WHERE organization_id = $1 AND conversation_id = $2',
      [scope.organizationId, scope.conversationId],
    );

  it('writes the reads in flight as one INSERT, each resolving once its row is committed', async () => {
    const scopes = await newConversations(20);
    const { handle, inserts } = countingHandle();
    await Promise.all(
      scopes.map((scope, i) => recordContextRender(handle, scope, { padVersion: i, chars: 100 + i, sha256: `h${i}` })),
    );
    // The first goes alone; the nineteen that came while it was written go together.
    expect(inserts).toEqual([1, 19]);
    for (const [i, scope] of scopes.entries()) {
      expect(await rowsOf(scope)).toEqual([{ pad_version: i, chars: 100 + i, sha256: `h${i}` }]);
    }

    // One at a time: nothing waits, one INSERT each.
    const [alone] = scopes;
    await recordContextRender(handle, alone as ConversationScope, { padVersion: 7, chars: 1, sha256: 'x' });
    expect(inserts).toEqual([1, 19, 1]);
  });

  it("fails only the read whose row cannot be written, not the others' in its batch", async () => {
    const scopes = await newConversations(5);
    const { handle, inserts } = countingHandle();
    // A conversation that does not exist (deleted between a read and its record).
    const gone = { organizationId: (scopes[0] as ConversationScope).organizationId, conversationId: randomUUID() };
    const results = await Promise.allSettled(
      [scopes[0], gone, ...scopes.slice(1)].map((scope, i) =>
        recordContextRender(handle, scope as ConversationScope, { padVersion: i, chars: i, sha256: `s${i}` }),
      ),
    );
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', ...Array(4).fill('fulfilled')]);
    // The batch of five failed, then went in row by row.
    expect(inserts).toEqual([1, 5, 1, 1, 1, 1, 1]);
    for (const scope of scopes) {
      expect(await rowsOf(scope)).toHaveLength(1);
    }
    expect(await rowsOf(gone)).toEqual([]);
  });
});
