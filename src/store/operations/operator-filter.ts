/**
 * The operator's filter of operations — the operator view's list and stream, and what a bulk
 * action acts on (bulk-actions.ts) — as one WHERE clause on `o` (the operation) and `g` (its
 * organization), so a list and the action taken on it can never disagree on what matches.
 */
import type { OperationStatus } from '../../domain/operation.ts';

export interface OperatorListFilter {
  /** An operation, conversation or organization id, an item id, or part of an organization's name. */
  search?: string;
  /** An organization's exact name. */
  organizationName?: string;
  status?: OperationStatus;
  operationType?: string;
  /** Created before this instant (ISO 8601 with its offset). */
  createdBefore?: string;
  /** Created after this instant. */
  createdAfter?: string;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** `%` and `_` match themselves in a LIKE pattern built from what an operator typed. */
function likePattern(text: string): string {
  return `%${text.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}

/** The filter's WHERE clause on `o` and `g`, its parameters numbered from `first`. */
export function filterClause(filter: OperatorListFilter, first: number): { sql: string; params: unknown[] } {
  const search = filter.search || null;
  const searchId = search && UUID.test(search) ? search.toLowerCase() : null;
  const n = (k: number) => `$${first + k}`;
  return {
    sql: `(${n(0)}::text IS NULL OR g.name = ${n(0)})
      AND (${n(1)}::text IS NULL OR o.status = ${n(1)})
      AND (${n(2)}::text IS NULL OR o.operation_type = ${n(2)})
      AND (${n(3)}::text IS NULL
           OR (${n(4)}::uuid IS NOT NULL AND ${n(4)}::uuid IN (o.id, o.conversation_id, o.organization_id))
           OR g.name ILIKE ${n(5)}
           OR EXISTS (SELECT 1 FROM assistant_operation_item si WHERE si.operation_id = o.id AND si.item_id = ${n(3)})
           OR EXISTS (SELECT 1 FROM assistant_operation_kept_failure sk
                      WHERE sk.operation_id = o.id AND sk.item_id = ${n(3)}))
      AND (${n(6)}::timestamptz IS NULL OR o.created_at < ${n(6)}::timestamptz)
      AND (${n(7)}::timestamptz IS NULL OR o.created_at > ${n(7)}::timestamptz)`,
    params: [
      filter.organizationName || null,
      filter.status ?? null,
      filter.operationType || null,
      search,
      searchId,
      search ? likePattern(search) : null,
      filter.createdBefore ?? null,
      filter.createdAfter ?? null,
    ],
  };
}
