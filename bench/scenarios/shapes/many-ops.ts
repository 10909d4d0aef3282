/**
 * Many small operations at once, the shape a platform with many organizations sees: 10,000
 * operations of 20 items across 100 organizations (a full run), each in a conversation of its
 * own, created over HTTP (the tool endpoint) by 50 concurrent clients, and run by two `opspad
 * worker` processes (the demo handler's no-op path, one batch of 20 per operation); the API is a
 * process of its own without workers (api-child.ts).
 *
 * - `many_ops_items_per_s`: every item over the time from the first create sent to the last
 *   operation completed.
 * - `many_ops_first_item_p99_ms`: per operation, from its create being sent to its first item
 *   recorded (the item rows' own time); the 99th percentile.
 * - `many_ops_org_finish_spread`: per organization, when its last operation completed (from the
 *   first create); the slowest over the median. Fair sharing keeps it near 1.
 */
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { Pool } from 'undici';
import { createApiKey } from '../../../src/store/index.ts';
import { startOpspadChild } from '../../lib/child.ts';
import { type BenchContext, type Entry, median, percentile, round, waitFor } from '../../lib/common.ts';
import { forkChild } from '../../lib/forked.ts';

const WORKERS = 2;
const TOOL = 'manage_assistant_operation';

interface Created {
  operationId: string;
  organization: number;
  sentAt: number;
}

export async function benchManyOps(ctx: BenchContext): Promise<Entry[]> {
  const { operations, itemsPerOperation, organizations, clients } = ctx.plan.manyOps;
  const prefix = `${ctx.prefix}-manyops`;
  const env = {
    DATABASE_URL: ctx.databaseUrl,
    REDIS_URL: ctx.redisUrl,
    OPSPAD_QUEUE_PREFIX: prefix,
    OPSPAD_LOG_LEVEL: 'warn',
    OPSPAD_ADMIN_PASSWORD: 'bench-admin-password',
    HOST: '127.0.0.1',
    PORT: '0',
  };
  const api = await forkChild(ctx, fileURLToPath(new URL('./api-child.ts', import.meta.url)), env);
  const url = await api.call<string>('url');
  const workers = await Promise.all(
    Array.from({ length: WORKERS }, () => startOpspadChild(ctx, 'worker', { OPSPAD_QUEUE_PREFIX: prefix })),
  );
  const keys: { organization_id: string; api_key: string }[] = [];
  for (let i = 0; i < organizations; i++) {
    keys.push(await createApiKey(ctx.db, `bench-many-ops-${i}-${randomUUID()}`));
  }
  const pool = new Pool(url, { connections: clients, keepAliveTimeout: 60_000 });
  try {
    const create = async (organization: number, op: number) => {
      const key = keys[organization] as (typeof keys)[number];
      const response = await pool.request({
        method: 'POST',
        path: `/v1/conversations/${randomUUID()}/tools/${TOOL}`,
        headers: { authorization: `Bearer ${key.api_key}`, 'content-type': 'application/json' },
        body: JSON.stringify({
          action: 'create',
          operation_type: 'demo',
          total_items: itemsPerOperation,
          item_ids: Array.from({ length: itemsPerOperation }, (_, i) => `contact-${op}-${i}`),
          batch_size: itemsPerOperation,
          execution: 'background',
          query_params: { latency_ms: 0, failure_rate: 0 },
        }),
      });
      const json = (await response.body.json()) as { operation_id?: string };
      if (response.statusCode !== 200 || !json.operation_id) {
        throw new Error(`create answered ${response.statusCode}: ${JSON.stringify(json).slice(0, 300)}`);
      }
      return json.operation_id;
    };
    const organizationIds = keys.map((k) => k.organization_id);
    const allDone = (what: string) =>
      waitFor(
        what,
        async () => {
          const rows = await ctx.db.query<{ n: number }>(
            `SELECT count(*)::int AS n FROM assistant_operation WHERE status = 'active' AND organization_id = ANY($1::uuid[])`,
            [organizationIds],
          );
          return rows[0]?.n === 0 ? true : undefined;
        },
        { everyMs: 50 },
      );
    // Untimed: one operation per client, so connections, plans and code are warm.
    await Promise.all(Array.from({ length: clients }, (_, i) => create(i % organizations, -1 - i)));
    await allDone('the warm-up operations to complete');

    const created: Created[] = [];
    let next = 0;
    const began = Date.now();
    await Promise.all(
      Array.from({ length: clients }, async () => {
        while (next < operations) {
          const op = next++;
          // Organizations interleaved, as many tenants' traffic arrives.
          const organization = op % organizations;
          const sentAt = Date.now();
          created.push({ operationId: await create(organization, op), organization, sentAt });
        }
      }),
    );
    const createdIn = (Date.now() - began) / 1000;
    await allDone(`${operations} small operations to complete`);
    const ids = created.map((c) => c.operationId);
    const done = await ctx.db.query<{ id: string; status: string; finished_ms: number; first_item_ms: number }>(
      `SELECT o.id, o.status, extract(epoch FROM o.updated_at) * 1000 AS finished_ms,
              (SELECT extract(epoch FROM min(i.updated_at)) * 1000 FROM assistant_operation_item i
               WHERE i.operation_id = o.id AND i.status <> 'pending') AS first_item_ms
       FROM assistant_operation o WHERE o.id = ANY($1::uuid[])`,
      [ids],
    );
    const byId = new Map(done.map((row) => [row.id, row]));
    const firstItem: number[] = [];
    const finishByOrganization = new Map<number, number>();
    let lastFinished = 0;
    for (const op of created) {
      const row = byId.get(op.operationId);
      if (row?.status !== 'completed') {
        throw new Error(`operation ${op.operationId} ended ${row?.status ?? 'missing'}`);
      }
      firstItem.push(Number(row.first_item_ms) - op.sentAt);
      const finished = Number(row.finished_ms) - began;
      lastFinished = Math.max(lastFinished, finished);
      finishByOrganization.set(op.organization, Math.max(finishByOrganization.get(op.organization) ?? 0, finished));
    }
    const items = operations * itemsPerOperation;
    const perSecond = items / (lastFinished / 1000);
    const finishes = [...finishByOrganization.values()];
    const spread = Math.max(...finishes) / median(finishes);
    const p99 = percentile(firstItem, 99);
    ctx.log(
      `many operations: ${operations} × ${itemsPerOperation} items, ${organizations} organizations, ${clients} clients: created in ${round(createdIn, 1)} s, all done in ${round(lastFinished / 1000, 2)} s (${round(perSecond, 0)} items/s); first item p50 ${round(percentile(firstItem, 50), 0)} ms, p99 ${round(p99, 0)} ms; organizations finished ${round(Math.min(...finishes) / 1000, 2)}–${round(Math.max(...finishes) / 1000, 2)} s (max/median ${round(spread, 2)})`,
    );
    const shape = `${operations.toLocaleString('en-US')} operations of ${itemsPerOperation} items (one batch each), ${organizations} organizations, created over HTTP by ${clients} clients; ${WORKERS} opspad worker processes, demo handler no-op`;
    return [
      {
        name: 'many_ops_items_per_s',
        value: Math.round(perSecond),
        unit: 'items/s',
        baseline: 'bullmq_job_per_item',
        n: items,
        note: `${shape}; first create sent to last operation completed (creates took ${round(createdIn, 1)} s)`,
      },
      {
        name: 'many_ops_first_item_p99_ms',
        value: round(p99, 0),
        unit: 'ms',
        n: operations,
        note: `create sent to the operation's first item recorded; p50 ${round(percentile(firstItem, 50), 0)} ms`,
      },
      {
        name: 'many_ops_org_finish_spread',
        value: round(spread, 2),
        unit: '×',
        n: organizations,
        note: `when each organization's last operation completed: the slowest over the median (${round(median(finishes) / 1000, 2)} s)`,
      },
    ];
  } finally {
    await pool.close();
    await Promise.all(workers.map((w) => w.stop()));
    await api.stop();
  }
}
