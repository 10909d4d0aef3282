/**
 * `createOpspad({ externalTracing: true })` in an application that registered its own
 * OpenTelemetry SDK: opspad's spans go to that SDK, and the workers' spans join the trace of the
 * request that created the work, because BullMQ's jobs carry its context. A file of its own: the
 * SDK registers globally for the process.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { InMemorySpanExporter, NodeTracerProvider, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient } from '../../src/client/index.ts';
import { createOpspad, defineHandler } from '../../src/index.ts';
import { embeddedEnv } from '../helpers/embedded-env.ts';

describe('createOpspad with the application’s own OpenTelemetry SDK (postgres)', () => {
  const exporter = new InMemorySpanExporter();
  const provider = new NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });

  beforeAll(() => {
    provider.register();
  });
  afterAll(async () => {
    await provider.shutdown();
  });

  it('sends opspad’s spans to it, the workers’ under the request that created the work', async () => {
    const opspad = await createOpspad({
      env: embeddedEnv(),
      externalTracing: true,
      handlers: [defineHandler({ type: 'traced_embedded', async handle() {} })],
    });
    const traceId = randomBytes(16).toString('hex');
    try {
      const key = await opspad.createApiKey('embedder');
      const conversation = randomUUID();
      const created = await fetch(`${opspad.url}/v1/conversations/${conversation}/tools/manage_assistant_operation`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${key.api_key}`,
          'content-type': 'application/json',
          traceparent: `00-${traceId}-${randomBytes(8).toString('hex')}-01`,
        },
        body: JSON.stringify({
          action: 'create',
          operation_type: 'traced_embedded',
          total_items: 3,
          item_ids: ['x', 'y', 'z'],
        }),
      });
      const body = (await created.json()) as { operation_id: string };
      expect(created.status, JSON.stringify(body)).toBe(200);
      const client = createClient({ baseUrl: opspad.url ?? '', apiKey: key.api_key });
      expect(await client.operations.finished(body.operation_id)).toMatchObject({ completed_count: 3 });
    } finally {
      await opspad.close();
    }
    const names = exporter.getFinishedSpans().map((span) => ({ name: span.name, traceId: span.spanContext().traceId }));
    const inTrace = (name: string) => names.some((span) => span.name === name && span.traceId === traceId);
    expect(inTrace('tool manage_assistant_operation'), JSON.stringify(names)).toBe(true);
    expect(inTrace('process batches-traced_embedded'), JSON.stringify(names)).toBe(true);
    expect(inTrace('handle batch'), JSON.stringify(names)).toBe(true);
  });
});
