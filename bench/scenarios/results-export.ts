/**
 * An operation's results file (`GET /v1/operations/:id/results`) at 1,000,000 items (a full
 * run), downloaded from a real `opspad start` process as fast as the client reads it, as JSON
 * Lines and then as CSV: rows per second, and the server's RSS sampled from /proc before and
 * during each download. The stream reads a page of rows at a time and waits for the socket, so
 * the peak should not grow with the operation.
 *
 * The items are recorded directly in SQL beforehand (one in twenty failed, the rest completed):
 * the scenario measures the export, not the record path.
 */
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { createApiKey, createOperation } from '../../src/store/index.ts';
import { startOpspadChild } from '../lib/child.ts';
import { type BenchContext, type Entry, itemIds, round, rssMb, sampleRss } from '../lib/common.ts';

/** Downloads the file at `url`, counting its lines; resolves with the count and the seconds. */
async function download(url: string, apiKey: string): Promise<{ lines: number; seconds: number; bytes: number }> {
  const start = performance.now();
  const response = await fetch(url, { headers: { authorization: `Bearer ${apiKey}` } });
  if (response.status !== 200 || !response.body) {
    throw new Error(`${url} answered ${response.status}: ${(await response.text()).slice(0, 300)}`);
  }
  let lines = 0;
  let bytes = 0;
  for await (const chunk of response.body) {
    bytes += chunk.byteLength;
    for (const byte of chunk) {
      if (byte === 10) {
        lines++;
      }
    }
  }
  return { lines, seconds: (performance.now() - start) / 1000, bytes };
}

export async function benchResultsExport(ctx: BenchContext): Promise<Entry[]> {
  const items = ctx.plan.exportItems;
  const { organization_id: organizationId, api_key: apiKey } = await createApiKey(
    ctx.db,
    `bench-export-${randomUUID()}`,
  );
  const { operation } = await createOperation(
    ctx.db,
    { organizationId, conversationId: randomUUID() },
    {
      operationType: 'send_sms',
      itemIds: itemIds(items),
      batchSize: 1_000,
      queryParams: null,
      notes: null,
      execution: 'assistant',
      actor: 'bench',
    },
  );
  await ctx.db.query(
    `UPDATE assistant_operation_item
     SET status = CASE WHEN ordinal % 20 = 0 THEN 'failed' ELSE 'completed' END,
         reason = CASE WHEN ordinal % 20 = 0 THEN 'carrier rejected the number, "invalid", retry later' END,
         attempts = 1, updated_at = now()
     WHERE operation_id = $1`,
    [operation.id],
  );
  const failed = Math.ceil(items / 20);
  await ctx.db.query(
    `UPDATE assistant_operation SET status = 'completed', completed_count = $2, failed_count = $3 WHERE id = $1`,
    [operation.id, items - failed, failed],
  );
  await ctx.db.query('VACUUM ANALYZE assistant_operation_item');

  const server = await startOpspadChild(ctx, 'start');
  try {
    const base = `${server.url}/v1/operations/${operation.id}/results`;
    // Untimed: a first small file, so the route's code and plans are warm.
    await download(`${base}?status=failed&format=csv`, apiKey);
    const entries: Entry[] = [];
    for (const format of ['jsonl', 'csv'] as const) {
      const before = rssMb(server.pid);
      const rss = sampleRss(server.pid, 20);
      const got = await download(`${base}?format=${format}`, apiKey);
      const peak = rss.stop();
      const expected = items + (format === 'csv' ? 1 : 0);
      if (got.lines !== expected) {
        throw new Error(`the ${format} file had ${got.lines} lines, not ${expected}`);
      }
      ctx.log(
        `results export (${format}): ${items} items, ${round(got.bytes / 1e6, 1)} MB in ${round(got.seconds, 2)} s (${round(items / got.seconds, 0)} rows/s); server RSS ${round(before, 0)} MB before, peak ${round(peak, 0)} MB during (${rss.samples} samples)`,
      );
      entries.push(
        {
          name: `export_${format}_rows_per_s`,
          value: Math.round(items / got.seconds),
          unit: 'rows/s',
          n: items,
          note: `${round(got.bytes / 1e6, 1)} MB from an \`opspad start\` process over loopback, read as fast as it came`,
        },
        {
          name: `export_${format}_server_peak_rss_mb`,
          value: round(peak, 0),
          unit: 'MB',
          n: items,
          note: `the server's RSS sampled every 20 ms during the download; ${round(before, 0)} MB just before it`,
        },
      );
    }
    return entries;
  } finally {
    await server.stop();
  }
}
