/**
 * Creates of random UUIDs in the order they were drawn, as a list of ids from a CRM arrives: the
 * order a create's COPY writes them in (item-copy.ts) is not the order of the unique
 * `(operation_id, item_id)` index, so every id lands on a random leaf of it. Whatever that costs
 * (docs/performance.md, "What limits each figure"), the answer must be the one sorted ids get:
 * every id stored once at its position in the body, the quota counting exactly those, and a
 * repeated id — in the first COPY segment, across segments, repeated twice — named in the order
 * of its first repeat, with nothing stored and nothing reserved.
 */

import { createHash, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findDuplicates } from '../../src/domain/validation.ts';
import { type Harness, startHarness, type Tenant } from '../helpers/harness.ts';

/** Three COPY segments of 100,000 rows (item-copy.ts), the last one partial. */
const COUNT = 250_000;
/**
 * The organization's quota in this file: room for the first create and for the refused one (a
 * repeat, not the quota, must be what refuses it), then for exactly 40,000 ids more.
 */
const QUOTA = 2 * COUNT + 40_000;

function uuids(count: number): string[] {
  return Array.from({ length: count }, () => randomUUID());
}

function createInput(itemIds: readonly string[]) {
  return { action: 'create', operation_type: 'bulk_tag', total_items: itemIds.length, item_ids: itemIds };
}

const md5 = (text: string) => createHash('md5').update(text).digest('hex');

describe('creates of random UUIDs in the order drawn (Postgres)', () => {
  let harness: Harness;
  let tenant: Tenant;

  beforeAll(async () => {
    harness = await startHarness('postgres', { env: { OPSPAD_MAX_STORED_ITEMS: String(QUOTA) } });
    tenant = await harness.newTenant();
  }, 60_000);

  afterAll(async () => {
    await harness?.close();
  });

  /** The tenant's item rows and its quota's count of stored items. */
  async function stored(): Promise<{ rows: number; quota: number }> {
    const [row] = await harness.db.query<{ rows: number; quota: number }>(
      `SELECT (SELECT count(*) FROM assistant_operation_item i JOIN assistant_operation o ON o.id = i.operation_id
               WHERE o.organization_id = $1)::int AS rows,
              coalesce((SELECT stored_items FROM organization_quota WHERE organization_id = $1), 0)::int AS quota`,
      [tenant.organizationId],
    );
    return row as { rows: number; quota: number };
  }

  it('stores every id once at its position in the body, and the quota counts exactly them', async () => {
    const ids = uuids(COUNT);
    const created = await tenant.op(randomUUID(), createInput(ids));
    expect(created.status).toBe(200);
    const operationId = created.body.operation_id as string;
    const [items] = await harness.db.query<{
      n: number;
      distinct: number;
      first: number;
      last: number;
      digest: string;
    }>(
      `SELECT count(*)::int AS n, count(DISTINCT item_id)::int AS distinct, min(ordinal) AS first,
              max(ordinal) AS last, md5(string_agg(item_id, ',' ORDER BY ordinal)) AS digest
       FROM assistant_operation_item WHERE operation_id = $1`,
      [operationId],
    );
    expect(items).toEqual({ n: COUNT, distinct: COUNT, first: 0, last: COUNT - 1, digest: md5(ids.join(',')) });
    const [operation] = await harness.db.query<{ total_items: number }>(
      'SELECT total_items FROM assistant_operation WHERE id = $1',
      [operationId],
    );
    expect(operation?.total_items).toBe(COUNT);
    expect(await stored()).toEqual({ rows: COUNT, quota: COUNT });
    // An id is found by its value, wherever it sorts.
    const probe = ids[COUNT - 7] as string;
    const [found] = await harness.db.query<{ ordinal: number }>(
      'SELECT ordinal FROM assistant_operation_item WHERE operation_id = $1 AND item_id = $2',
      [operationId, probe],
    );
    expect(found?.ordinal).toBe(COUNT - 7);
  }, 120_000);

  it('names repeated random ids in the order of their first repeat; nothing stored, nothing reserved', async () => {
    const before = await stored();
    const ids = uuids(COUNT);
    // Repeats inside the first segment, across segments, of one id twice, and the last id.
    ids[60_000] = ids[59_999] as string;
    for (let k = 0; k < 22; k++) {
      ids[120_000 + k * 5_000] = ids[k * 3_001] as string;
    }
    ids[COUNT - 2] = ids[0] as string;
    ids[COUNT - 1] = ids[0] as string;
    const repeated = findDuplicates(ids, 21);
    expect(repeated.length).toBe(21);
    const refused = await tenant.op(randomUUID(), createInput(ids));
    expect(refused.status).toBe(400);
    expect(refused.body.error).toMatchObject({
      code: 'duplicate_item_ids',
      message: `Invalid input: item_ids: each id must appear once; repeated: ${repeated
        .slice(0, 20)
        .map((id) => JSON.stringify(id))
        .join(', ')} and more.`,
      details: { field: 'item_ids', duplicate_ids: repeated.slice(0, 20) },
    });
    expect(await stored()).toEqual(before);
  }, 120_000);

  it('fills the quota to its last item and refuses one more, counting random ids exactly', async () => {
    const before = await stored();
    const room = QUOTA - before.quota;
    const over = await tenant.op(randomUUID(), createInput(uuids(room + 1)));
    expect(over.status).toBe(409);
    expect(over.body.error).toMatchObject({
      code: 'quota_exceeded',
      details: { quota: 'stored_items', used: before.quota, requested: room + 1, limit: QUOTA },
    });
    expect(await stored()).toEqual(before);
    const exact = await tenant.op(randomUUID(), createInput(uuids(room)));
    expect(exact.status).toBe(200);
    expect(await stored()).toEqual({ rows: QUOTA, quota: QUOTA });
  }, 120_000);
});
