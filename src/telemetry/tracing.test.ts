import { once } from 'node:events';
import { createServer } from 'node:net';
import { Writable } from 'node:stream';
import { trace } from '@opentelemetry/api';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../config/env.ts';
import { createLogger } from '../logger.ts';
import { startTracing, TRACING_OFF, tracesEndpoint } from './tracing.ts';

describe('tracing configuration', () => {
  it('is off without an endpoint: no BullMQ hook, no tracer provider registered', async () => {
    const tracing = await startTracing(loadConfig({}), createLogger('silent'));
    expect(tracing).toBe(TRACING_OFF);
    expect(tracing.bullmq).toBeUndefined();
    // Spans started now are the API's no-op ones: nothing records, nothing is exported.
    expect(trace.getTracer('opspad').startSpan('probe').isRecording()).toBe(false);
  });

  it('posts traces to <endpoint>/v1/traces, or to the traces endpoint as given', () => {
    expect(tracesEndpoint(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/' }))).toBe(
      'http://collector:4318/v1/traces',
    );
    expect(
      tracesEndpoint(
        loadConfig({
          OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318',
          OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://traces.example/otlp/spans',
        }),
      ),
    ).toBe('https://traces.example/otlp/spans');
    expect(
      tracesEndpoint(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_SDK_DISABLED: 'true' })),
    ).toBeUndefined();
  });

  it('parses headers and resource attributes as key=value lists, percent-decoded', () => {
    const config = loadConfig({
      OTEL_EXPORTER_OTLP_HEADERS: 'authorization=Bearer%20abc, x-team=ops',
      OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment=prod',
    });
    expect(config.OTEL_EXPORTER_OTLP_HEADERS).toEqual({ authorization: 'Bearer abc', 'x-team': 'ops' });
    expect(config.OTEL_RESOURCE_ATTRIBUTES).toEqual({ 'deployment.environment': 'prod' });
    expect(config.OTEL_SERVICE_NAME).toBe('opspad');
    expect(config.OTEL_TRACES_SAMPLER).toBe('parentbased_always_on');
  });

  it('refuses bad values, naming the variable and never echoing headers or endpoints', () => {
    const attempt = () =>
      loadConfig({
        OTEL_EXPORTER_OTLP_HEADERS: 'authorization',
        OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318?token=s3cret',
        OTEL_TRACES_SAMPLER: 'sometimes',
        OTEL_TRACES_SAMPLER_ARG: '2',
        OPSPAD_METRICS_PORT: '70000',
      });
    expect(attempt).toThrow(ConfigError);
    const message = (() => {
      try {
        attempt();
        return '';
      } catch (error) {
        return (error as Error).message;
      }
    })();
    expect(message).toContain('OTEL_EXPORTER_OTLP_HEADERS: must be key=value pairs separated by commas');
    expect(message).toContain('OTEL_EXPORTER_OTLP_ENDPOINT: must be a URL');
    expect(message).toContain('OTEL_TRACES_SAMPLER: must be one of always_on');
    expect(message).toContain('OTEL_TRACES_SAMPLER_ARG: must be a number from 0 to 1');
    expect(message).toContain('OPSPAD_METRICS_PORT: must be at most 65535');
    expect(message).not.toContain('s3cret');
    expect(message).not.toContain('"authorization"');
  });
});

describe('tracing with a collector that is down', () => {
  it('says so in the log instead of dropping spans silently', async () => {
    // A loopback port nobody listens on any more.
    const probe = createServer().listen(0, '127.0.0.1');
    await once(probe, 'listening');
    const { port } = probe.address() as { port: number };
    await new Promise<void>((resolve) => probe.close(() => resolve()));

    const lines: { msg?: string; level?: number }[] = [];
    const capture = new Writable({
      write(chunk: Buffer, _encoding, done) {
        lines.push(JSON.parse(chunk.toString('utf8')));
        done();
      },
    });
    const tracing = await startTracing(
      loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}`, OTEL_EXPORTER_OTLP_TIMEOUT: '2000' }),
      pino({ level: 'info' }, capture),
    );
    expect(tracing.bullmq).toBeDefined();
    const span = trace.getTracer('opspad').startSpan('probe');
    expect(span.isRecording()).toBe(true);
    span.end();
    await tracing.shutdown(); // flushes: the one export fails
    expect(lines.map((line) => line.msg)).toContain('exporting traces over OTLP/HTTP');
    expect(lines.find((line) => line.msg === 'traces could not be exported')?.level).toBe(40);
    // Unregistered again: spans are the no-op ones once more.
    expect(trace.getTracer('opspad').startSpan('after').isRecording()).toBe(false);
  });
});
