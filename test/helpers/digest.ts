/**
 * A SHA-256 of everything an organization has in the database: every row of every table, as
 * `to_jsonb` text, sorted (C collation) and hashed inside the database in one round trip. Equal
 * digests before and after a call mean the call wrote nothing for that organization.
 *
 * Rows are attributed to an organization through their `organization_id` (the organization row
 * through its id, items through their operation). Rows no organization owns (an item whose
 * operation is gone) count as everyone else's.
 *
 * {@link uncoveredTables} lists the tables the digest does not read, so a test can fail when a
 * migration adds one.
 */
import type { Queryable } from '../../src/store/db/db.ts';

/** Each table, and how its rows map to an organization id (`t` is the table's alias). */
const TABLES: Record<string, { owner: string; join?: string }> = {
  organization: { owner: 't.id' },
  api_key: { owner: 't.organization_id' },
  organization_webhook_secret: { owner: 't.organization_id' },
  organization_quota: { owner: 't.organization_id' },
  organization_key_limit: { owner: 't.organization_id' },
  assistant_conversation: { owner: 't.organization_id' },
  assistant_operation: { owner: 't.organization_id' },
  assistant_operation_item: {
    owner: 'o.organization_id',
    join: 'LEFT JOIN assistant_operation o ON o.id = t.operation_id',
  },
  assistant_operation_kept_failure: {
    owner: 'o.organization_id',
    join: 'LEFT JOIN assistant_operation o ON o.id = t.operation_id',
  },
  assistant_operation_lease: {
    owner: 'o.organization_id',
    join: 'LEFT JOIN assistant_operation o ON o.id = t.operation_id',
  },
  operation_event: { owner: 't.organization_id' },
  operation_throttle: {
    owner: 'o.organization_id',
    join: 'LEFT JOIN assistant_operation o ON o.id = t.operation_id',
  },
  operator_bulk_action_target: { owner: 't.organization_id' },
  assistant_execution: { owner: 't.organization_id' },
  scratchpad_note: { owner: 't.organization_id' },
  scratchpad_trace: { owner: 't.organization_id' },
  scratchpad: { owner: 't.organization_id' },
  scratchpad_version: { owner: 't.organization_id' },
  scratchpad_event: { owner: 't.organization_id' },
  context_render: { owner: 't.organization_id' },
  mcp_session: { owner: 't.organization_id' },
  oauth_grant: { owner: 't.organization_id' },
  oauth_code: { owner: 'g.organization_id', join: 'LEFT JOIN oauth_grant g ON g.id = t.grant_id' },
  oauth_token: { owner: 'g.organization_id', join: 'LEFT JOIN oauth_grant g ON g.id = t.grant_id' },
};

/**
 * Tables that hold no tenant data (migration and retention bookkeeping; OAuth clients, which
 * register themselves before any organization is granted to them; an operator's bulk actions,
 * whose targets are each organization's).
 */
const NOT_TENANT_DATA = new Set([
  '__drizzle_migrations',
  'retention_watermark',
  'oauth_client',
  'operator_bulk_action',
]);

const LINES = Object.entries(TABLES)
  .map(
    ([table, { owner, join }]) =>
      `SELECT ${owner} AS org, '${table} ' || to_jsonb(t)::text AS line FROM ${table} t ${join ?? ''}`,
  )
  .join('\n  UNION ALL ');

const hashOf = (filter: string) =>
  `encode(sha256(convert_to(coalesce(string_agg(line, E'\\n' ORDER BY line COLLATE "C") FILTER (WHERE ${filter}), ''), 'UTF8')), 'hex')`;

export interface Digest {
  /** SHA-256 (hex) of the rows. */
  sha256: string;
  rows: number;
}

/** The digest of `organizationId`'s rows. */
export async function organizationDigest(db: Queryable, organizationId: string): Promise<Digest> {
  const [row] = await db.query<{ sha256: string; rows: number }>(
    `WITH lines AS (${LINES})
     SELECT ${hashOf('true')} AS sha256, count(*)::int AS rows FROM lines WHERE org = $1::uuid`,
    [organizationId],
  );
  if (!row) {
    throw new Error('the digest query returned no row');
  }
  return row;
}

/**
 * Two digests in one round trip: `own`, the rows of `organizationId`, and `others`, every other
 * row of the database (other organizations, and rows no organization owns). Only meaningful on a
 * database no other test writes to (a harness's own PGlite).
 */
export async function ownAndOthersDigests(
  db: Queryable,
  organizationId: string,
): Promise<{ own: Digest; others: Digest }> {
  const [row] = await db.query<{ own: string; own_rows: number; others: string; others_rows: number }>(
    `WITH lines AS (${LINES})
     SELECT ${hashOf('org = $1::uuid')} AS own, count(*) FILTER (WHERE org = $1::uuid)::int AS own_rows,
            ${hashOf('org IS DISTINCT FROM $1::uuid')} AS others,
            count(*) FILTER (WHERE org IS DISTINCT FROM $1::uuid)::int AS others_rows
     FROM lines`,
    [organizationId],
  );
  if (!row) {
    throw new Error('the digest query returned no row');
  }
  return { own: { sha256: row.own, rows: row.own_rows }, others: { sha256: row.others, rows: row.others_rows } };
}

/** How many rows `organizationId` has in each table the digests read. */
export async function rowsPerTable(db: Queryable, organizationId: string): Promise<Record<string, number>> {
  const [row] = await db.query<Record<string, number>>(
    `SELECT ${Object.entries(TABLES)
      .map(
        ([table, { owner, join }]) =>
          `(SELECT count(*) FROM ${table} t ${join ?? ''} WHERE ${owner} = $1::uuid)::int AS ${table}`,
      )
      .join(', ')}`,
    [organizationId],
  );
  return row ?? {};
}

/** Tables of the public schema the digests do not read (should be none). */
export async function uncoveredTables(db: Queryable): Promise<string[]> {
  const rows = await db.query<{ table_name: string }>(
    `SELECT table_name FROM information_schema.tables
     WHERE table_schema = 'public' AND table_type = 'BASE TABLE' ORDER BY table_name`,
  );
  return rows.map((r) => r.table_name).filter((name) => !(name in TABLES) && !NOT_TENANT_DATA.has(name));
}
