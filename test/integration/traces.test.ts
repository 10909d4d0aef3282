/**
 * OpenTelemetry traces, exported over OTLP/HTTP (JSON) to a real receiver on loopback: an
 * operation created through the API (in the test process) with the caller's `traceparent` runs
 * in a real `opspad worker` process, and its trace links the HTTP call → the tool call → the
 * dispatch → BullMQ's add → each batch job (in the worker) → lease, handler and record, under the
 * caller's trace id; every step of a lane hangs off the dispatch side by side. Spans carry the
 * organization, operation, type and batch size, and never an item id or the API key. On the
 * jobs in Redis, then in Postgres (the trace context travels in the job either way). The webhook
 * handler hands the trace on to its receiver (`traceparent`), and a caller's `baggage` goes
 * nowhere.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { closeCountingClient, countingHandler } from '../fixtures/counting-handler.ts';
import { type Harness, harnessPrefix, ids, QUEUE_BACKENDS, startHarness } from '../helpers/harness.ts';
import { type OtlpReceiver, type ReceivedSpan, SPAN_KIND, startOtlpReceiver } from '../helpers/otlp-receiver.ts';
import { killAllChildren, RUN_TIMEOUT_MS, startWorker } from '../helpers/processes.ts';
import { testKey } from '../helpers/redis.ts';
import { finished, waitForProgress } from '../helpers/wait.ts';

let harness: Harness | undefined;
let receiver: OtlpReceiver | undefined;

afterEach(async () => {
  await killAllChildren();
  await harness?.close();
  harness = undefined;
  await receiver?.close();
  receiver = undefined;
});

afterAll(() => {
  closeCountingClient();
});

function only(spans: ReceivedSpan[], what: string): ReceivedSpan {
  expect(spans, what).toHaveLength(1);
  return spans[0] as ReceivedSpan;
}

describe.each(QUEUE_BACKENDS)('traces over OTLP (postgres database, %s queue, a real worker process)', (queue) => {
  it('one trace from the API call through the jobs to the handler and the record', { timeout: 120_000 }, async () => {
    receiver = await startOtlpReceiver();
    const otel = { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_BSP_SCHEDULE_DELAY: '100' };
    const prefix = harnessPrefix();
    harness = await startHarness('postgres', {
      queue,
      handlers: [countingHandler],
      env: { OPSPAD_QUEUE_PREFIX: prefix, ...otel },
    });
    const worker = await startWorker('traced-worker', prefix, otel, queue);

    // The caller's own trace: opspad's spans must join it.
    const traceId = randomBytes(16).toString('hex');
    const callerSpanId = randomBytes(8).toString('hex');
    const items = [...ids(57), ...ids(3, 'fail')];
    const tenant = await harness.newTenant();
    const created = await tenant.tool(
      randomUUID(),
      {
        action: 'create',
        operation_type: 'counting',
        total_items: items.length,
        item_ids: items,
        batch_size: 10,
        max_parallel_batches: 2,
        query_params: { sidefx_key: testKey('sidefx'), latency_ms: 1 },
      },
      'manage_assistant_operation',
      { traceparent: `00-${traceId}-${callerSpanId}-01` },
    );
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    const operationId = created.body.operation_id as string;
    const end = await waitForProgress(harness.url, tenant, operationId, finished, RUN_TIMEOUT_MS);
    expect(end).toMatchObject({ status: 'completed', completed_count: 57, failed_count: 3 });

    // A graceful stop exports what each process still buffers.
    worker.process.kill('SIGTERM');
    expect((await worker.waitForExit()).code).toBe(0);
    await harness.close();
    harness = undefined;
    expect(receiver.strays).toEqual([]);

    const spans = receiver.spans.filter((span) => span.traceId === traceId);
    const byId = new Map(spans.map((span) => [span.spanId, span]));
    const childrenOf = (parent: ReceivedSpan) => spans.filter((span) => span.parentSpanId === parent.spanId);
    for (const span of spans) {
      expect(span.resource['service.name']).toBe('opspad');
    }

    // The API process: HTTP call → tool call → dispatch → BullMQ's add.
    const server = only(
      spans.filter((span) => span.kind === SPAN_KIND.server && span.parentSpanId === callerSpanId),
      'the HTTP span under the caller',
    );
    expect(server.name).toBe('POST /v1/conversations/:conversationId/tools/:toolName');
    expect(server.attributes['http.response.status_code']).toBe(200);
    const tool = only(childrenOf(server), 'the tool span');
    expect(tool.name).toBe('tool manage_assistant_operation');
    expect(tool.attributes).toMatchObject({
      'opspad.tool.action': 'create',
      'opspad.organization.id': tenant.organizationId,
      'opspad.operation.id': operationId,
      'opspad.operation.type': 'counting',
    });
    const dispatch = only(
      childrenOf(tool).filter((span) => span.name === 'dispatch operation'),
      'the dispatch span',
    );
    expect(dispatch.attributes).toMatchObject({ 'opspad.operation.id': operationId, 'opspad.lanes': 2 });
    const add = only(
      childrenOf(dispatch).filter((span) => span.kind === SPAN_KIND.producer),
      'the add span',
    );
    expect(add.name).toBe('addBulk batches-counting');
    const apiPid = server.resource['process.pid'];
    expect(apiPid).toBe(process.pid);

    // The worker process: each job of each lane is a job span under the one add, side by side
    // (the lane's later jobs too, though each was added by the job before it). A job runs a slice
    // of its lane's batches, so there is at least one per lane and at most one per batch.
    const jobs = spans.filter((span) => span.kind === SPAN_KIND.consumer);
    expect(jobs.length).toBeGreaterThanOrEqual(2);
    for (const job of jobs) {
      expect(job.parentSpanId).toBe(add.spanId);
      expect(job.name).toBe('process batches-counting');
      expect(job.resource['process.pid']).toBe(worker.process.pid);
      expect(job.attributes).toMatchObject({
        'opspad.operation.id': operationId,
        'opspad.organization.id': tenant.organizationId,
        'opspad.operation.type': 'counting',
      });
    }
    expect(new Set(jobs.map((job) => `${job.attributes['opspad.lane']}.${job.attributes['opspad.step']}`)).size).toBe(
      jobs.length,
    );

    // Under each job that found a batch: lease → handle → record for each of its batches, with
    // the batch's size and outcome counts; together the records account for every item.
    const handled = spans.filter((span) => span.name === 'handle batch');
    const records = spans.filter((span) => span.name === 'record results');
    expect(handled).toHaveLength(6);
    expect(records).toHaveLength(6);
    for (const span of [...handled, ...records]) {
      expect(jobs.map((job) => job.spanId)).toContain(span.parentSpanId);
    }
    for (const span of handled) {
      expect(span.attributes['opspad.batch.size']).toBe(10);
      const siblings = childrenOf(byId.get(span.parentSpanId as string) as ReceivedSpan).map((s) => s.name);
      expect(siblings).toEqual(expect.arrayContaining(['lease batch', 'handle batch', 'record results']));
    }
    const total = (name: string) => records.reduce((sum, span) => sum + Number(span.attributes[name] ?? 0), 0);
    expect(total('opspad.items.completed')).toBe(57);
    expect(total('opspad.items.failed')).toBe(3);

    // Never an item id, never the API key, in any attribute of any span (events included).
    const everything = JSON.stringify(spans.map((span) => [span.name, span.attributes, span.eventAttributes]));
    for (const secret of [...items, tenant.apiKey]) {
      expect(everything).not.toContain(`"${secret}"`);
    }
    expect(everything).not.toContain(tenant.apiKey);
  });
});

describe('traces reach webhook receivers (postgres database, redis queue, in-process workers)', () => {
  it("sends the batch's traceparent with each webhook, and never the caller's baggage", async () => {
    receiver = await startOtlpReceiver();
    const received: IncomingHttpHeaders[] = [];
    const hooks = createServer((req, res) => {
      received.push(req.headers);
      req.resume().on('end', () => res.writeHead(204).end());
    });
    hooks.listen(0, '127.0.0.1');
    await once(hooks, 'listening');
    try {
      harness = await startHarness('postgres', {
        workers: true,
        env: {
          OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
          OTEL_BSP_SCHEDULE_DELAY: '100',
          OPSPAD_WEBHOOK_ALLOW: '127.0.0.1',
        },
      });
      const traceId = randomBytes(16).toString('hex');
      const tenant = await harness.newTenant();
      const created = await tenant.tool(
        randomUUID(),
        {
          action: 'create',
          operation_type: 'webhook',
          total_items: 4,
          item_ids: ids(4),
          batch_size: 2,
          query_params: { url: `http://127.0.0.1:${(hooks.address() as AddressInfo).port}/hook` },
        },
        'manage_assistant_operation',
        { traceparent: `00-${traceId}-${randomBytes(8).toString('hex')}-01`, baggage: 'tenant.secret=do-not-forward' },
      );
      expect(created.status, JSON.stringify(created.body)).toBe(200);
      const end = await waitForProgress(harness.url, tenant, created.body.operation_id as string, finished);
      expect(end).toMatchObject({ status: 'completed', completed_count: 4 });
      await harness.close();
      harness = undefined;

      expect(received).toHaveLength(4);
      const handled = receiver.spans.filter((span) => span.traceId === traceId && span.name === 'handle batch');
      expect(handled).toHaveLength(2);
      for (const headers of received) {
        const [, hookTrace, hookParent, flags] = String(headers.traceparent).split('-');
        expect(hookTrace).toBe(traceId);
        expect(flags).toBe('01');
        // Sent from inside the batch that handled the item.
        expect(handled.map((span) => span.spanId)).toContain(hookParent);
        expect(headers.baggage).toBeUndefined();
      }
      expect(JSON.stringify(receiver.spans)).not.toContain('do-not-forward');
    } finally {
      await new Promise<void>((resolve) => {
        hooks.close(() => resolve());
        hooks.closeAllConnections();
      });
    }
  });
});
