/**
 * What recording a batch costs as an operation grows: opspad's `update` (items in their own
 * rows) against the seed's literal design (every id and result inside the operation's
 * `state_json`, read, changed and written back whole on every update), which the bench alone
 * implements, on a copy of the seed's table.
 */
import { randomUUID } from 'node:crypto';
import { type ConversationScope, createOperation, leaseBatch, recordResults } from '../../src/store/index.ts';
import { type BenchContext, type Entry, itemIds, median, round, timed } from '../lib/common.ts';

const UPDATE_BATCH = 5;

/**
 * The ms of `recordResults` over `samples` batches of the operation, each leased first (the
 * lease's ms go to `leaseTimes` when given).
 */
export async function measureRecord(
  ctx: BenchContext,
  scope: ConversationScope,
  operationId: string,
  samples: number,
  failEvery = 0,
  leaseTimes?: number[],
): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; i < samples; i++) {
    const { result: lease, ms: leaseMs } = await timed(() =>
      leaseBatch(ctx.db, scope, { operationId, owner: 'bench', leaseSeconds: 300 }),
    );
    if (lease.batch.length === 0) {
      break;
    }
    const failed = failEvery > 0 ? lease.batch.filter((_, j) => j % failEvery === failEvery - 1) : [];
    const completed = lease.batch.filter((id) => !failed.includes(id));
    const { ms } = await timed(() =>
      recordResults(ctx.db, scope, {
        operationId,
        completedIds: completed,
        failed: failed.map((id) => ({ id, reason: 'invalid phone number' })),
        owner: 'bench',
      }),
    );
    times.push(ms);
    leaseTimes?.push(leaseMs);
  }
  return times;
}

async function assistantOperation(ctx: BenchContext, organizationId: string, items: number, batchSize: number) {
  const scope = { organizationId, conversationId: randomUUID() };
  const { operation } = await createOperation(ctx.db, scope, {
    operationType: 'send_sms',
    itemIds: itemIds(items),
    batchSize,
    queryParams: { tag: 'Lead' },
    notes: null,
    execution: 'assistant',
    actor: 'bench',
  });
  return { scope, operationId: operation.id };
}

/** The ms of leases and records of 100-item batches, of small operations and of a big one, in turns. */
export interface RecordPairTimes {
  small: number[];
  large: number[];
  smallLease: number[];
  largeLease: number[];
}

/**
 * A 100-item batch of a 1,000-item operation, then one of the big operation, and so on, so that
 * both medians come from the same stretch of time on a machine whose load varies.
 */
export async function measureRecordPair(
  ctx: BenchContext,
  organizationId: string,
  big: { scope: ConversationScope; operationId: string },
): Promise<RecordPairTimes> {
  const times: RecordPairTimes = { small: [], large: [], smallLease: [], largeLease: [] };
  let current = await assistantOperation(ctx, organizationId, 1_000, 100);
  while (times.small.length < ctx.plan.recordSamples) {
    let [ms] = await measureRecord(ctx, current.scope, current.operationId, 1, 0, times.smallLease);
    if (ms === undefined) {
      current = await assistantOperation(ctx, organizationId, 1_000, 100);
      [ms] = await measureRecord(ctx, current.scope, current.operationId, 1, 0, times.smallLease);
    }
    times.small.push(ms as number);
    const [bigMs] = await measureRecord(ctx, big.scope, big.operationId, 1, 0, times.largeLease);
    if (bigMs !== undefined) {
      times.large.push(bigMs);
    }
  }
  return times;
}

/** `record_ms_n1k` and `record_ms_n1m` (and the leases'), in turns (measureRecordPair). */
export async function benchRecordPair(
  ctx: BenchContext,
  organizationId: string,
  big: { scope: ConversationScope; operationId: string; items: number },
): Promise<Entry[]> {
  const { small, large, smallLease, largeLease } = await measureRecordPair(ctx, organizationId, big);
  ctx.log(
    `record a 100-item batch: ${round(median(small), 2)} ms at N=1,000, ${round(median(large), 2)} ms at N=${big.items.toLocaleString('en-US')}; lease it: ${round(median(smallLease), 2)} / ${round(median(largeLease), 2)} ms (in turns)`,
  );
  return [
    { name: 'lease_ms_n1k', value: round(median(smallLease), 2), unit: 'ms', n: smallLease.length, note: 'median' },
    {
      name: 'lease_ms_n1m',
      value: round(median(largeLease), 2),
      unit: 'ms',
      baseline: 'lease_ms_n1k',
      n: largeLease.length,
      note: `median, in turns with lease_ms_n1k; ${big.items.toLocaleString('en-US')} items`,
    },
    { name: 'record_ms_n1k', value: round(median(small), 2), unit: 'ms', n: small.length, note: 'median' },
    {
      name: 'record_ms_n1m',
      value: round(median(large), 2),
      unit: 'ms',
      baseline: 'record_ms_n1k',
      n: large.length,
      note: `median, in turns with record_ms_n1k; ${big.items.toLocaleString('en-US')} items`,
    },
  ];
}

interface SeedState {
  item_ids: string[];
  cursor: number;
  completed_ids: string[];
  failed: { id: string; reason: string }[];
  batch_size: number;
  query_params: Record<string, unknown>;
}

/** The seed's update: read the whole state, merge the results, write the whole state back. */
async function seedUpdate(ctx: BenchContext, id: string): Promise<number> {
  const { ms } = await timed(() =>
    ctx.db.transaction(async (tx) => {
      const rows = await tx.query<{ state_json: SeedState; completed_count: number; failed_count: number }>(
        'SELECT state_json, completed_count, failed_count FROM bench_seed_operation WHERE id = $1 FOR UPDATE',
        [id],
      );
      const row = rows[0];
      if (!row) {
        throw new Error('seed operation not found');
      }
      const state = row.state_json;
      const batch = state.item_ids.slice(state.cursor, state.cursor + UPDATE_BATCH);
      const failed = batch.slice(-1).map((itemId) => ({ id: itemId, reason: 'invalid phone number' }));
      state.completed_ids.push(...batch.slice(0, -1));
      state.failed.push(...failed);
      state.cursor += batch.length;
      await tx.query(
        `UPDATE bench_seed_operation SET state_json = $2::jsonb, completed_count = $3, failed_count = $4,
           updated_at = now() WHERE id = $1`,
        [
          id,
          JSON.stringify(state),
          row.completed_count + batch.length - failed.length,
          row.failed_count + failed.length,
        ],
      );
    }),
  );
  return ms;
}

async function seedOperation(ctx: BenchContext, organizationId: string, items: number): Promise<string> {
  await ctx.db.query(
    `CREATE TABLE IF NOT EXISTS bench_seed_operation
       (LIKE assistant_operation INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING INDEXES)`,
  );
  const state: SeedState = {
    item_ids: itemIds(items),
    cursor: 0,
    completed_ids: [],
    failed: [],
    batch_size: UPDATE_BATCH,
    query_params: { tag: 'Lead' },
  };
  const rows = await ctx.db.query<{ id: string }>(
    `INSERT INTO bench_seed_operation
       (conversation_id, organization_id, operation_type, status, total_items, state_json)
     VALUES ($1, $2, 'send_sms', 'active', $3, $4::jsonb) RETURNING id`,
    [randomUUID(), organizationId, items, JSON.stringify(state)],
  );
  return (rows[0] as { id: string }).id;
}

/**
 * 5-item updates at each operation size, both designs. The first updates of a fresh operation
 * are measured: the cheapest ones for the seed's design, whose state only grows from there.
 */
export async function benchUpdates(
  ctx: BenchContext,
  organizationId: string,
): Promise<{ entries: Entry[]; chart: { size: number; design: string; ms: number }[] }> {
  const chart: { size: number; design: string; ms: number }[] = [];
  const entries: Entry[] = [];
  for (const size of ctx.plan.updateSizes) {
    const { scope, operationId } = await assistantOperation(ctx, organizationId, size, UPDATE_BATCH);
    const seedId = await seedOperation(ctx, organizationId, size);
    // The seed's design rewrites megabytes per update at the larger sizes: fewer samples there.
    const seedSamples = size >= 1_000_000 ? 3 : size >= 100_000 ? 10 : ctx.plan.updateSamples;
    // In turns, so that both designs see the same load.
    const opspadTimes: number[] = [];
    const seedTimes: number[] = [];
    for (let i = 0; i < ctx.plan.updateSamples; i++) {
      opspadTimes.push(...(await measureRecord(ctx, scope, operationId, 1, UPDATE_BATCH)));
      if (i < seedSamples) {
        seedTimes.push(await seedUpdate(ctx, seedId));
      }
    }
    const opspadMs = median(opspadTimes);
    const seedMs = median(seedTimes);
    await ctx.db.query('DELETE FROM bench_seed_operation WHERE id = $1', [seedId]);
    chart.push(
      { size, design: 'opspad (item rows)', ms: opspadMs },
      { size, design: 'seed (state_json JSONB)', ms: seedMs },
    );
    ctx.log(`5-item update at N=${size}: opspad ${round(opspadMs, 2)} ms, seed JSONB ${round(seedMs, 2)} ms`);
    if (size === 10_000) {
      entries.push(
        {
          name: 'seed_jsonb_update_ms_n10k',
          value: round(seedMs, 2),
          unit: 'ms',
          n: seedTimes.length,
          note: 'median, the first updates of the operation',
        },
        {
          name: 'opspad_update_ms_n10k',
          value: round(opspadMs, 2),
          unit: 'ms',
          baseline: 'seed_jsonb_update_ms_n10k',
          ratio: round(opspadMs / seedMs, 3),
          n: ctx.plan.updateSamples,
          note: 'median',
        },
      );
    }
  }
  return { entries, chart };
}
