/**
 * opspad over HTTP, in its own process (`opspad start`): creating a 1,000,000-item operation
 * through the tool endpoint (time and the server's peak RSS), recording batches of it, 50
 * conversations driving the seed's loop at once, and creates of 1,000,000 UUIDs sorted and not.
 * The creates alone are the `create` group (benchCreates).
 */
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { Pool } from 'undici';
import { createApiKey } from '../../src/store/index.ts';
import { type OpspadChild, startOpspadChild } from '../lib/child.ts';
import { type BenchContext, type Entry, itemIds, percentile, round, rssMb, sampleRss } from '../lib/common.ts';
import { startHealthzProbe } from '../lib/healthz-probe.ts';
import { benchCopyFloor } from './copy-floor.ts';
import { benchRecordPair } from './record.ts';

const TOOL = 'manage_assistant_operation';

export interface HttpResults {
  entries: Entry[];
}

async function send(
  pool: Pool,
  method: 'GET' | 'POST',
  path: string,
  apiKey: string,
  body?: string,
): Promise<{ status: number; json: Record<string, unknown> }> {
  const response = await pool.request({
    method,
    path,
    headers: { authorization: `Bearer ${apiKey}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    body,
  });
  const text = await response.body.text();
  return { status: response.statusCode, json: text ? JSON.parse(text) : {} };
}

/**
 * One conversation of the seed's loop, over and over until `deadline`: create an operation of
 * 30 contacts (batch 5), then progress and update (4 completed, 1 failed) until no batch is
 * left, then complete. Like an assistant's runtime, every tool call is preceded by a read of the
 * context fragment (the system prompt's tail for that turn).
 */
async function conversationLoop(
  pool: Pool,
  apiKey: string,
  deadline: number,
  latencies: number[],
  errors: { count: number; last?: string },
): Promise<void> {
  const conversation = randomUUID();
  const toolPath = `/v1/conversations/${conversation}/tools/${TOOL}`;
  const contextPath = `/v1/conversations/${conversation}/context`;
  const call = async (method: 'GET' | 'POST', path: string, input?: unknown) => {
    const start = performance.now();
    try {
      const result = await send(pool, method, path, apiKey, input === undefined ? undefined : JSON.stringify(input));
      latencies.push(performance.now() - start);
      if (result.status >= 400) {
        errors.count++;
        errors.last = `${result.status} ${JSON.stringify(result.json).slice(0, 200)}`;
        return undefined;
      }
      return result.json;
    } catch (error) {
      errors.count++;
      errors.last = (error as Error).message;
      return undefined;
    }
  };
  const turn = async (input: Record<string, unknown>) => {
    await call('GET', contextPath);
    return call('POST', toolPath, input);
  };
  let round = 0;
  while (performance.now() < deadline) {
    round++;
    const created = await turn({
      action: 'create',
      operation_type: 'send_sms',
      total_items: 30,
      item_ids: Array.from({ length: 30 }, (_, i) => `contact-${round}-${i}`),
      batch_size: 5,
      query_params: { tag: 'Lead', status: 'active' },
      notes: 'Follow-up campaign for Q2 leads',
    });
    const operationId = created?.operation_id as string | undefined;
    if (!operationId) {
      continue;
    }
    while (performance.now() < deadline) {
      const progress = await turn({ action: 'progress', operation_id: operationId });
      const batch = (progress?.batch as string[] | undefined) ?? [];
      if (batch.length === 0) {
        await turn({ action: 'complete', operation_id: operationId });
        break;
      }
      await turn({
        action: 'update',
        operation_id: operationId,
        completed_ids: batch.slice(0, -1),
        failed: batch.slice(-1).map((id) => ({ id, reason: 'invalid phone number' })),
      });
    }
  }
}

/** The body of the benchmark's large creates: one tool call holding every id. */
function createBody(ids: readonly string[]): string {
  return JSON.stringify({
    action: 'create',
    operation_type: 'bulk_tag',
    total_items: ids.length,
    item_ids: ids,
    batch_size: 100,
  });
}

/**
 * `create_1m_uuid_s`: what the order of the ids costs a create. The benchmark's own ids are
 * sorted, so each one's entry goes to the right edge of the unique id index; ids in no order, as
 * a list of UUIDs arrives, land on random leaves (docs/performance.md, "What
 * limits each figure"). The same 1,000,000 random UUIDs are created twice, sorted first
 * (`create_1m_uuid_sorted_s`, the baseline) and then as drawn, so the ratio is their order's
 * alone: same ids, same warm server, one after the other. Both operations are deleted afterwards,
 * so the groups after this one do not run beside them.
 */
async function benchIdOrder(ctx: BenchContext, pool: Pool, apiKey: string): Promise<Entry[]> {
  const drawn = Array.from({ length: ctx.plan.createItems }, () => randomUUID());
  // Code-unit order, which for these ASCII ids is the byte order of the index's "C" collation.
  const sorted = [...drawn].sort();
  const created: string[] = [];
  const timed = async (ids: readonly string[], order: string): Promise<number> => {
    const body = createBody(ids);
    // Settled as the first create was (bench/run.ts): pages dirtied before are written now.
    await ctx.db.query('CHECKPOINT');
    const start = performance.now();
    const response = await send(pool, 'POST', `/v1/conversations/${randomUUID()}/tools/${TOOL}`, apiKey, body);
    const seconds = (performance.now() - start) / 1000;
    if (response.status !== 200) {
      throw new Error(
        `create of ${ids.length} ${order} UUIDs answered ${response.status}: ${JSON.stringify(response.json)}`,
      );
    }
    created.push(response.json.operation_id as string);
    ctx.log(`create ${ids.length} ${order} UUIDs over HTTP: ${round(seconds, 2)} s`);
    return seconds;
  };
  try {
    const sortedSeconds = await timed(sorted, 'sorted');
    const drawnSeconds = await timed(drawn, 'random');
    return [
      {
        name: 'create_1m_uuid_sorted_s',
        value: round(sortedSeconds, 2),
        unit: 's',
        n: sorted.length,
        note: 'random UUIDs for ids, sent sorted',
      },
      {
        name: 'create_1m_uuid_s',
        value: round(drawnSeconds, 2),
        unit: 's',
        n: drawn.length,
        baseline: 'create_1m_uuid_sorted_s',
        note: 'the same UUIDs in the order drawn',
      },
    ];
  } finally {
    // Their items go with them (the item table's delete trigger, drizzle/0001_item_cascade.sql).
    await ctx.db.query('DELETE FROM assistant_operation WHERE id = ANY($1::uuid[])', [created]);
  }
}

/** What `create_1m_s` leaves for the scenarios after it: its operation, in its conversation. */
interface MillionCreated {
  entries: Entry[];
  scope: { organizationId: string; conversationId: string };
  operationId: string;
  items: number;
}

/**
 * `create_1m_s` and what is read with it: the tool endpoint, one request holding every id, with
 * /healthz asked meanwhile, the server's peak RSS, and Postgres alone with the same rows after it.
 */
async function benchCreateMillion(
  ctx: BenchContext,
  server: OpspadChild,
  pool: Pool,
  key: { api_key: string; organization_id: string },
): Promise<MillionCreated> {
  const conversation = randomUUID();
  const ids = itemIds(ctx.plan.createItems, 'item');
  const body = createBody(ids);
  const idleRss = rssMb(server.pid);
  const rss = sampleRss(server.pid, 20);
  // While the create runs, /healthz is asked again and again, one request at a time, from a
  // process of its own (healthz-probe.ts): its slowest answer is how long the server kept
  // everyone else waiting.
  const probe = await startHealthzProbe(server.url as string);
  const start = performance.now();
  const created = await send(pool, 'POST', `/v1/conversations/${conversation}/tools/${TOOL}`, key.api_key, body);
  const createMs = performance.now() - start;
  const healthMs = await probe.stop();
  rss.stop();
  if (created.status !== 200) {
    throw new Error(`create of ${ids.length} items answered ${created.status}: ${JSON.stringify(created.json)}`);
  }
  const peak = Math.max(rss.peak, rssMb(server.pid, 'VmHWM'));
  ctx.log(
    `create ${ids.length} items over HTTP: ${round(createMs / 1000, 2)} s, server RSS ${round(idleRss, 0)} → peak ${round(peak, 0)} MB (${(body.length / 1e6).toFixed(1)} MB body), /healthz meanwhile at most ${round(Math.max(...healthMs), 1)} ms`,
  );
  const entries: Entry[] = [
    {
      name: 'create_1m_s',
      value: round(createMs / 1000, 2),
      unit: 's',
      n: ids.length,
      baseline: 'copy_1m_floor_s',
      note: `one tool call, ${(body.length / 1e6).toFixed(1)} MB body`,
    },
    {
      name: 'create_1m_healthz_max_ms',
      value: round(Math.max(...healthMs), 1),
      unit: 'ms',
      n: healthMs.length,
      note: `slowest of ${healthMs.length} /healthz asked one after another during the create (p50 ${round(percentile(healthMs, 50), 1)} ms)`,
    },
    {
      name: 'create_1m_peak_rss_mb',
      value: round(peak, 0),
      unit: 'MB',
      n: ids.length,
      note: `opspad start process, ${round(idleRss, 0)} MB before the request`,
    },
    // Postgres alone with the same rows, right after (copy-floor.ts): the machine's part.
    await benchCopyFloor(ctx, ids),
  ];
  return {
    entries,
    scope: { organizationId: key.organization_id, conversationId: conversation },
    operationId: created.json.operation_id as string,
    items: ids.length,
  };
}

/**
 * The `create` group: the creates of the `http` group alone (`create_1m_*`, `copy_1m_floor_s`,
 * `create_1m_uuid_*`), in the same order, on a server of their own.
 */
export async function benchCreates(ctx: BenchContext): Promise<Entry[]> {
  const server = await startOpspadChild(ctx, 'start', { OPSPAD_LOG_LEVEL: 'info' });
  const pool = new Pool(server.url as string, { connections: 2, keepAliveTimeout: 60_000 });
  try {
    const key = await createApiKey(ctx.db, `bench-create-${randomUUID()}`);
    const million = await benchCreateMillion(ctx, server, pool, key);
    return [...million.entries, ...(await benchIdOrder(ctx, pool, key.api_key))];
  } finally {
    await pool.close();
    await server.stop();
  }
}

export async function benchHttp(ctx: BenchContext, organizationId: string): Promise<HttpResults> {
  const server = await startOpspadChild(ctx, 'start', { OPSPAD_LOG_LEVEL: 'info' });
  const url = server.url as string;
  const entries: Entry[] = [];
  const pool = new Pool(url, { connections: ctx.plan.httpConversations + 2, keepAliveTimeout: 60_000 });
  try {
    // ── create_1m: the tool endpoint, one request holding every id ──
    const key = await createApiKey(ctx.db, `bench-http-${randomUUID()}`);
    const million = await benchCreateMillion(ctx, server, pool, key);
    entries.push(...million.entries);

    // ── record_ms_n1k and record_ms_n1m: 100-item batches of that operation and of small ones ──
    entries.push(
      ...(await benchRecordPair(ctx, organizationId, {
        scope: million.scope,
        operationId: million.operationId,
        items: million.items,
      })),
    );

    // ── http_loop: 50 conversations, the seed's loop, for a fixed time ──
    const keys = await Promise.all(
      Array.from({ length: ctx.plan.httpConversations }, (_, i) =>
        createApiKey(ctx.db, `bench-loop-${i}-${randomUUID()}`),
      ),
    );
    // Warm-up: a second of the same load, not counted (connections, JIT, plan caches).
    const warmupErrors = { count: 0 };
    const warmupDeadline = performance.now() + 1_000;
    await Promise.all(keys.map((k) => conversationLoop(pool, k.api_key, warmupDeadline, [], warmupErrors)));
    // One conversation alone: the service time of a request when nothing queues.
    const single: number[] = [];
    const singleErrors = { count: 0 };
    const singleSeconds = Math.min(5, ctx.plan.httpSeconds);
    await conversationLoop(
      pool,
      (keys[0] as { api_key: string }).api_key,
      performance.now() + singleSeconds * 1000,
      single,
      singleErrors,
    );
    ctx.log(
      `HTTP loop, 1 conversation, ${singleSeconds} s: ${single.length} requests, p50 ${round(percentile(single, 50), 2)} ms, p99 ${round(percentile(single, 99), 2)} ms`,
    );
    entries.push(
      {
        name: 'http_single_p50_ms',
        value: round(percentile(single, 50), 2),
        unit: 'ms',
        n: single.length,
        note: `1 conversation alone, ${singleSeconds} s, ${round(single.length / singleSeconds, 0)} req/s`,
      },
      {
        name: 'http_single_p99_ms',
        value: round(percentile(single, 99), 2),
        unit: 'ms',
        n: single.length,
        note: `1 conversation alone, ${singleErrors.count} errors`,
      },
    );

    const latencies: number[] = [];
    const errors: { count: number; last?: string } = { count: 0 };
    const loopStart = performance.now();
    const deadline = loopStart + ctx.plan.httpSeconds * 1000;
    await Promise.all(keys.map((k) => conversationLoop(pool, k.api_key, deadline, latencies, errors)));
    const seconds = (performance.now() - loopStart) / 1000;
    const rps = latencies.length / seconds;
    const p50 = percentile(latencies, 50);
    const p99 = percentile(latencies, 99);
    ctx.log(
      `HTTP loop, ${keys.length} conversations, ${round(seconds, 1)} s: ${latencies.length} requests (${round(rps, 0)}/s), p50 ${round(p50, 2)} ms, p99 ${round(p99, 2)} ms, ${errors.count} errors${errors.last ? ` (last: ${errors.last})` : ''}`,
    );
    const note = `${keys.length} conversations, ${round(seconds, 0)} s, ${round(rps, 0)} req/s`;
    entries.push(
      { name: 'http_loop_p50_ms', value: round(p50, 2), unit: 'ms', n: latencies.length, note },
      { name: 'http_loop_p99_ms', value: round(p99, 2), unit: 'ms', n: latencies.length, note },
      { name: 'http_loop_errors', value: errors.count, unit: 'count', n: latencies.length },
      { name: 'http_loop_rps', value: round(rps, 0), unit: 'req/s', n: latencies.length, note },
    );

    // ── create_1m_uuid: what the ids' order costs a create; last in the group, so no figure above
    // is taken beside its rows ──
    entries.push(...(await benchIdOrder(ctx, pool, key.api_key)));
  } finally {
    await pool.close();
    await server.stop();
  }
  return { entries };
}
