/**
 * Beyond a million: one operation of 10,000,000 ids (a full run; a quick run makes it small, to
 * check the path end to end) created over HTTP in one tool call, its body streamed to the server
 * as it is written (about 160 MB of JSON), by an `opspad start` whose item and body limits are
 * raised for it (OPSPAD_MAX_ITEMS, OPSPAD_MAX_BODY_BYTES: the settings an operator would raise).
 * Then 100-item batches of it leased and recorded, in turns with batches of 1,000-item
 * operations, as the 1,000,000-item pair of the http group does.
 *
 * It runs last: its rows stay until the run's database is dropped, and no other figure is taken
 * beside them.
 */
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { Readable } from 'node:stream';
import { Pool } from 'undici';
import { createApiKey } from '../../src/store/index.ts';
import { startOpspadChild } from '../lib/child.ts';
import { type BenchContext, type Entry, median, round, rssMb, sampleRss } from '../lib/common.ts';
import { measureRecordPair } from './record.ts';

const ID_CHUNK = 10_000;

/** The create's body, written as it is sent: the ids `item-00000000` on. */
async function* streamedCreateBody(count: number): AsyncGenerator<string> {
  yield `{"action":"create","operation_type":"bulk_tag","total_items":${count},"batch_size":100,"item_ids":[`;
  for (let start = 0; start < count; start += ID_CHUNK) {
    const end = Math.min(count, start + ID_CHUNK);
    const ids: string[] = [];
    for (let i = start; i < end; i++) {
      ids.push(`"item-${String(i).padStart(8, '0')}"`);
    }
    yield (start === 0 ? '' : ',') + ids.join(',');
  }
  yield ']}';
}

/** `<what>_n10m`: its median, with its ratio to the 1,000-item operations' taken in turns with it. */
function inTurns(what: 'lease_ms' | 'record_ms', large: number[], small: number[], size: string): Entry {
  return {
    name: `${what}_n10m`,
    value: round(median(large), 2),
    unit: 'ms',
    baseline: `${what}_n1k`,
    ratio: round(median(large) / median(small), 3),
    n: large.length,
    note: `median; ratio to 1,000-item operations' ${what === 'lease_ms' ? 'leases' : 'records'} taken in turns with it (${round(median(small), 2)} ms); ${size}`,
  };
}

export async function benchScale(ctx: BenchContext): Promise<Entry[]> {
  const items = ctx.plan.scaleItems;
  const server = await startOpspadChild(ctx, 'start', {
    OPSPAD_MAX_ITEMS: String(items),
    OPSPAD_MAX_BODY_BYTES: String(Math.max(64 * 2 ** 20, items * 20)),
  });
  const pool = new Pool(server.url as string, { connections: 2, keepAliveTimeout: 60_000 });
  try {
    const key = await createApiKey(ctx.db, `bench-scale-${randomUUID()}`);
    const conversation = randomUUID();
    await ctx.db.query('CHECKPOINT');
    const idleRss = rssMb(server.pid);
    const rss = sampleRss(server.pid, 20);
    const start = performance.now();
    const response = await pool.request({
      method: 'POST',
      path: `/v1/conversations/${conversation}/tools/manage_assistant_operation`,
      headers: { authorization: `Bearer ${key.api_key}`, 'content-type': 'application/json' },
      body: Readable.from(streamedCreateBody(items)),
    });
    const json = (await response.body.json()) as { operation_id?: string };
    const seconds = (performance.now() - start) / 1000;
    const peak = Math.max(rss.stop(), rssMb(server.pid, 'VmHWM'));
    if (response.statusCode !== 200 || !json.operation_id) {
      throw new Error(`create of ${items} ids answered ${response.statusCode}: ${JSON.stringify(json).slice(0, 300)}`);
    }
    ctx.log(
      `create ${items.toLocaleString('en-US')} ids over HTTP (streamed body): ${round(seconds, 2)} s, server RSS ${round(idleRss, 0)} → peak ${round(peak, 0)} MB`,
    );
    const big = {
      scope: { organizationId: key.organization_id, conversationId: conversation },
      operationId: json.operation_id,
    };
    const times = await measureRecordPair(ctx, key.organization_id, big);
    ctx.log(
      `record a 100-item batch: ${round(median(times.small), 2)} ms at N=1,000, ${round(median(times.large), 2)} ms at N=${items.toLocaleString('en-US')}; lease it: ${round(median(times.smallLease), 2)} / ${round(median(times.largeLease), 2)} ms (in turns)`,
    );
    const size = `${items.toLocaleString('en-US')} items`;
    return [
      {
        name: 'create_10m_s',
        value: round(seconds, 2),
        unit: 's',
        baseline: 'create_1m_s',
        n: items,
        note: `one tool call, body streamed (${size}); opspad start with OPSPAD_MAX_ITEMS and OPSPAD_MAX_BODY_BYTES raised`,
      },
      {
        name: 'create_10m_peak_rss_mb',
        value: round(peak, 0),
        unit: 'MB',
        n: items,
        note: `opspad start process during the create, ${round(idleRss, 0)} MB before it`,
      },
      inTurns('lease_ms', times.largeLease, times.smallLease, size),
      inTurns('record_ms', times.large, times.small, size),
    ];
  } finally {
    await pool.close();
    await server.stop();
  }
}
