/**
 * An organization's approval policy: background operations of more items than `approve_above`
 * wait for a person (store/operations/operation-approval.ts); null, none wait.
 */
import type { Queryable } from '../db/db.ts';

export interface ApprovalPolicy {
  organization_id: string;
  organization: string;
  approve_above: number | null;
}

/** Sets the policy of the organization named `name`; null when there is no such organization. */
export async function setApprovalPolicy(
  db: Queryable,
  name: string,
  approveAbove: number | null,
): Promise<ApprovalPolicy | null> {
  const rows = await db.query<ApprovalPolicy>(
    `UPDATE organization SET approve_above = $2 WHERE name = $1
     RETURNING id AS organization_id, name AS organization, approve_above`,
    [name, approveAbove],
  );
  return rows[0] ?? null;
}

/** The policy of the organization named `name`; null when there is no such organization. */
export async function getApprovalPolicy(db: Queryable, name: string): Promise<ApprovalPolicy | null> {
  const rows = await db.query<ApprovalPolicy>(
    'SELECT id AS organization_id, name AS organization, approve_above FROM organization WHERE name = $1',
    [name],
  );
  return rows[0] ?? null;
}
