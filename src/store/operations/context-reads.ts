/**
 * What the context fragment reads on every turn, in one statement: whether the organization has
 * used the conversation id, the pad's version and stored recitation, and the first page of the
 * conversation's open operations. It was three statements sent side by side (three pooled
 * connections and three round trips per turn); one statement is one round trip and one snapshot.
 * The reads in flight share that statement (db/batched.ts): each conversation is a row of its
 * arrays, and its rows come back tagged with its place.
 *
 * Lock order: none; one snapshot of committed rows.
 * Cost, per conversation of a batch: a primary-key probe of assistant_conversation and of
 * scratchpad, and the index range of its open operations bounded by `limit`, each with its lease
 * rows (O(lanes)).
 * The recitation comes on the first row only, so a page of operations does not repeat it.
 */
import type { ListedOperation } from '../../domain/operation.ts';
import { batched } from '../db/batched.ts';
import type { Queryable } from '../db/db.ts';
import { prepared } from '../db/prepared.ts';
import { IN_FLIGHT_COLUMN } from '../leases/item-sql.ts';
import type { StoredRecitation } from '../scratchpads/scratchpad-repo.ts';
import type { ConversationScope } from '../tenants/conversation-repo.ts';
import { type OpenOperationsPage, openOperationsTotal } from './operation-reads.ts';
import { LISTED_COLUMNS, OPERATION_COLUMNS } from './operation-row.ts';
import { OPEN_STATUSES_SQL } from './status-sql.ts';

export interface ContextInputs {
  /** Whether the organization has used this conversation id (reading never creates it). */
  exists: boolean;
  pad: { version: number; recitation: StoredRecitation | null };
  page: OpenOperationsPage;
}

type Row = Partial<ListedOperation & { in_flight_count: number }> & {
  conversation_exists: boolean;
  pad_version: number | null;
  pad_recitation: StoredRecitation | null;
};

const OPERATION_NAMES = OPERATION_COLUMNS.split(',').map((c) => c.trim());

/**
 * For each conversation of `pairs` (`n`, its place in the batch), two key probes and its
 * operations. Every join names the pair's organization and conversation: a row only ever
 * carries its own conversation's data.
 */
const contextInputsSql = (pairs: string) => `SELECT r.n, EXISTS (SELECT 1 FROM assistant_conversation c
            WHERE c.organization_id = r.organization_id AND c.id = r.conversation_id) AS conversation_exists,
          p.version AS pad_version,
          CASE WHEN ops.position IS NULL OR ops.position = 1 THEN p.recitation END AS pad_recitation,
          ${OPERATION_NAMES.map((c) => `ops.${c}`).join(', ')}, ops.in_flight_count
   FROM ${pairs}
   LEFT JOIN scratchpad p ON p.conversation_id = r.conversation_id AND p.organization_id = r.organization_id
   LEFT JOIN LATERAL (
     SELECT ${LISTED_COLUMNS('o.')}, ${IN_FLIGHT_COLUMN},
            row_number() OVER (ORDER BY (o.status = 'active') DESC, o.updated_at DESC, o.id) AS position
     FROM assistant_operation o
     WHERE o.organization_id = r.organization_id AND o.conversation_id = r.conversation_id
       AND o.status IN (${OPEN_STATUSES_SQL})
     ORDER BY (o.status = 'active') DESC, o.updated_at DESC, o.id
     LIMIT $3) ops ON true
   ORDER BY r.n, ops.position`;

/**
 * Planned once per connection (db/prepared.ts). A batch's statement stays on custom plans (the
 * arrays' length is part of its cost); a read alone uses the one-conversation form, whose generic
 * plan Postgres keeps.
 */
const CONTEXT_INPUTS_SQL = prepared(
  contextInputsSql('unnest($1::uuid[], $2::uuid[]) WITH ORDINALITY AS r(organization_id, conversation_id, n)'),
);
const ONE_CONTEXT_INPUTS_SQL = prepared(
  contextInputsSql('(SELECT $1::uuid AS organization_id, $2::uuid AS conversation_id, 1 AS n) r'),
);

/** Reads in flight at most in one statement. */
const MAX_BATCH = 64;

interface Asked {
  scope: ConversationScope;
  limit: number;
}

/**
 * The context reads in flight, in one statement (db/batched.ts): each turn reads its conversation's
 * inputs, and turns of many conversations arrive together.
 */
const readBatch = batched<Asked, Row[]>(async (db, batch) => {
  const only = batch.length === 1 ? batch[0] : undefined;
  const rows = await (only
    ? db.query<Row & { n: number }>(ONE_CONTEXT_INPUTS_SQL, [
        only.scope.organizationId,
        only.scope.conversationId,
        only.limit,
      ])
    : db.query<Row & { n: string | number }>(CONTEXT_INPUTS_SQL, [
        batch.map((a) => a.scope.organizationId),
        batch.map((a) => a.scope.conversationId),
        Math.max(...batch.map((a) => a.limit)),
      ]));
  const answers = batch.map((): Row[] => []);
  for (const row of rows) {
    answers[Number(row.n) - 1]?.push(row);
  }
  return answers.map((answer, i) => answer.slice(0, (batch[i] as Asked).limit));
}, MAX_BATCH);

export async function readContextInputs(
  db: Queryable,
  scope: ConversationScope,
  limit: number,
): Promise<ContextInputs> {
  const rows = await readBatch(db, { scope, limit });
  const first = rows[0];
  const operations = rows
    .filter((row) => row.id !== null && row.id !== undefined)
    .map((row) => {
      const operation: Record<string, unknown> = { in_flight_count: row.in_flight_count };
      for (const name of OPERATION_NAMES) {
        operation[name] = row[name as keyof Row];
      }
      return operation as unknown as ListedOperation & { in_flight_count: number };
    });
  const total = await openOperationsTotal(db, scope, operations.length, limit);
  return {
    exists: first?.conversation_exists === true,
    pad: { version: first?.pad_version ?? 0, recitation: first?.pad_recitation ?? null },
    page: { operations, total },
  };
}
