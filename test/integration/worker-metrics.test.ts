/**
 * The metrics of a real `opspad worker` process (OPSPAD_METRICS_PORT): it serves `/metrics`
 * behind the operator sign-in (and `/healthz`, `/readyz` without), on loopback unless told
 * otherwise; after it alone ran an operation, its item counters equal the items it recorded and
 * its lease, handler and record timings count one observation per batch. The Grafana dashboard in
 * docs/ queries only metric names such a scrape has, so it cannot drift from the code.
 *
 * The API runs in the test process (`startHarness`, no workers of its own), so every item is
 * recorded by the child.
 */
import { randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { closeCountingClient, countingHandler, sideEffects } from '../fixtures/counting-handler.ts';
import { type Harness, harnessPrefix, ids, startHarness } from '../helpers/harness.ts';
import { killAllChildren, logMessage, RUN_TIMEOUT_MS, type Spawned, startWorker } from '../helpers/processes.ts';
import { testKey } from '../helpers/redis.ts';
import { eventually, finished, waitForProgress } from '../helpers/wait.ts';

const PASSWORD = 'worker-metrics-password';
const basic = (user: string, password: string) => `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

let harness: Harness | undefined;

afterEach(async () => {
  await killAllChildren();
  await harness?.close();
  harness = undefined;
});

afterAll(() => {
  closeCountingClient();
});

/** The worker's metrics base URL, from its 'metrics listening' log line. */
async function metricsUrlOf(worker: Spawned): Promise<string> {
  const line = await worker.waitForLine((l) => logMessage(l) === 'metrics listening', "the 'metrics listening' line");
  const url = (JSON.parse(line) as { url: string }).url;
  return url.replace(/\/metrics$/, '');
}

/** One sample's value: `name{labels} value`, the labels in any order. */
function sample(text: string, name: string, labels: Record<string, string>): number | undefined {
  for (const line of text.split('\n')) {
    const match = /^([a-z_]+)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!match || match[1] !== name) {
      continue;
    }
    const found = Object.fromEntries(
      [...(match[2] ?? '').matchAll(/([a-z_]+)="((?:[^"\\]|\\.)*)"/g)].map((m) => [m[1], m[2]]),
    );
    if (Object.entries(labels).every(([key, value]) => found[key] === value)) {
      return Number(match[3]);
    }
  }
  return undefined;
}

/** Every metric name a dashboard panel or variable queries. */
function dashboardMetricNames(dashboard: unknown): Set<string> {
  const names = new Set<string>();
  const visit = (node: unknown, key?: string) => {
    if (typeof node === 'string') {
      if (key === 'expr' || key === 'query' || key === 'definition') {
        for (const match of node.matchAll(/\bopspad_[a-z_]+/g)) {
          names.add(match[0]);
        }
      }
    } else if (Array.isArray(node)) {
      for (const item of node) {
        visit(item);
      }
    } else if (node && typeof node === 'object') {
      for (const [k, v] of Object.entries(node)) {
        visit(v, k);
      }
    }
  };
  visit(dashboard);
  return names;
}

/** A name is in a scrape as a family (`# TYPE name`) or as a histogram's series. */
function scrapeHas(text: string, name: string): boolean {
  const base = name.replace(/_(bucket|sum|count)$/, '');
  return (
    text.includes(`# TYPE ${name} `) || (base !== name && new RegExp(`^# TYPE ${base} histogram$`, 'm').test(text))
  );
}

describe('metrics of an opspad worker process (postgres database, redis queue)', () => {
  it('serves its own counters behind the operator sign-in, matching the items it recorded', {
    timeout: 120_000,
  }, async () => {
    const prefix = harnessPrefix();
    harness = await startHarness('postgres', {
      handlers: [countingHandler],
      env: { OPSPAD_QUEUE_PREFIX: prefix },
    });
    const worker = await startWorker('metrics-worker', prefix, {
      OPSPAD_METRICS_PORT: '0',
      OPSPAD_ADMIN_PASSWORD: PASSWORD,
    });
    const base = await metricsUrlOf(worker);
    // Loopback unless OPSPAD_METRICS_HOST says otherwise.
    expect(new URL(base).hostname).toBe('127.0.0.1');
    // Where to scrape and how to sign in, printed once started (the password itself was set).
    await eventually(
      async () =>
        worker.stderr().includes(`Metrics: ${base}/metrics  user: admin  password: (OPSPAD_ADMIN_PASSWORD)`)
          ? true
          : undefined,
      { what: 'the metrics line on stderr' },
    );

    // 200 items in batches of 20: 193 complete, 7 fail for good (ids starting with fail-).
    const items = [...ids(193), ...ids(7, 'fail')];
    const sidefx = testKey('sidefx');
    const tenant = await harness.newTenant();
    const created = await tenant.op(randomUUID(), {
      action: 'create',
      operation_type: 'counting',
      total_items: items.length,
      item_ids: items,
      batch_size: 20,
      max_parallel_batches: 3,
      query_params: { sidefx_key: sidefx, latency_ms: 1 },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    const operationId = created.body.operation_id as string;
    const end = await waitForProgress(harness.url, tenant, operationId, finished, RUN_TIMEOUT_MS);
    expect(end).toMatchObject({ status: 'completed', completed_count: 193, failed_count: 7 });
    expect((await sideEffects(sidefx)).size).toBe(193);

    // Without credentials, and with wrong ones: 401 and the sign-in prompt, no metrics.
    const anonymous = await fetch(`${base}/metrics`);
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers.get('www-authenticate')).toMatch(/^Basic realm=/);
    expect(await anonymous.text()).not.toContain('opspad_items_recorded_total');
    const wrong = await fetch(`${base}/metrics`, { headers: { authorization: basic('admin', 'not-the-password') } });
    expect(wrong.status).toBe(401);

    const scrape = await fetch(`${base}/metrics`, { headers: { authorization: basic('admin', PASSWORD) } });
    expect(scrape.status).toBe(200);
    expect(scrape.headers.get('content-type')).toMatch(/^text\/plain/);
    expect(scrape.headers.get('x-frame-options')).toBe('DENY');
    const text = await scrape.text();
    const counting = { operation_type: 'counting' };
    expect(sample(text, 'opspad_items_recorded_total', { ...counting, outcome: 'completed' })).toBe(193);
    expect(sample(text, 'opspad_items_recorded_total', { ...counting, outcome: 'failed' })).toBe(7);
    // Ten batches of twenty, each handled and recorded once; lanes that found nothing left
    // leased too (empty leases count), so there are at least ten leases.
    expect(sample(text, 'opspad_batch_duration_seconds_count', counting)).toBe(10);
    expect(sample(text, 'opspad_handler_duration_seconds_count', counting)).toBe(10);
    expect(sample(text, 'opspad_record_duration_seconds_count', counting)).toBe(10);
    expect(sample(text, 'opspad_lease_duration_seconds_count', counting)).toBeGreaterThanOrEqual(10);
    expect(sample(text, 'opspad_items_released_total', counting)).toBeUndefined();
    // Queue depth, read at scrape time: the counting queue has nothing left to run.
    expect(sample(text, 'opspad_queue_jobs', { queue: 'batches-counting', state: 'waiting' })).toBe(0);
    expect(sample(text, 'opspad_queue_jobs', { queue: 'batches-counting', state: 'active' })).toBe(0);

    // Health checks need no sign-in: a probe has no credentials.
    const health = await fetch(`${base}/healthz`);
    expect(health.status).toBe(200);
    const ready = await fetch(`${base}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toMatchObject({ status: 'ready', checks: { postgres: 'ok', redis: 'ok' } });

    // The dashboard queries only names this scrape has.
    const dashboard = JSON.parse(await readFile(new URL('../../docs/grafana-dashboard.json', import.meta.url), 'utf8'));
    const names = dashboardMetricNames(dashboard);
    expect(names.size).toBeGreaterThanOrEqual(10);
    expect([...names].filter((name) => !scrapeHas(text, name))).toEqual([]);
    // ...and it charts the item counters and batch timings this test checked.
    for (const name of [
      'opspad_items_recorded_total',
      'opspad_batch_duration_seconds_bucket',
      'opspad_lease_duration_seconds_bucket',
      'opspad_record_duration_seconds_bucket',
      'opspad_queue_jobs',
    ]) {
      expect(names).toContain(name);
    }
  });

  it('a worker without OPSPAD_METRICS_PORT opens no metrics port', async () => {
    const prefix = harnessPrefix();
    const worker = await startWorker('quiet-worker', prefix);
    // Logged before the workers start, so it would be among the lines by now.
    expect(worker.lines.some((line) => logMessage(line) === 'metrics listening')).toBe(false);
  });
});
