/**
 * The OpenTelemetry SDK for traces: a Node tracer provider (AsyncLocalStorage context, W3C
 * trace-context propagation) whose spans a batch processor sends as OTLP/HTTP JSON. Imported only
 * by tracing.ts, and only when an endpoint is configured. Everything it needs comes from the
 * parsed configuration, so what opspad honours is what docs/configuration.md lists.
 */
import { randomUUID } from 'node:crypto';
import { context, DiagLogLevel, diag, propagation, trace } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BatchSpanProcessor,
  NodeTracerProvider,
  ParentBasedSampler,
  type Sampler,
  TraceIdRatioBasedSampler,
} from '@opentelemetry/sdk-trace-node';
import type { Settings } from '../config/env.ts';

/** What tracing reads. */
type Config = Settings<'telemetry'>;

import type { Logger } from '../logger.ts';

/** A collector that is down fails every export: said at most once a minute, with the count. */
const WARN_EVERY_MS = 60_000;

/**
 * The SDK reports a failed export through OpenTelemetry's diagnostic logger, silent by default:
 * routed to opspad's log, so traces that stop arriving have a cause an operator can read.
 */
function reportExportProblems(logger: Logger): void {
  let last = 0;
  let unsaid = 0;
  const warn = (message: string) => {
    const now = Date.now();
    if (now - last < WARN_EVERY_MS) {
      unsaid += 1;
      return;
    }
    last = now;
    logger.warn({ problem: message.slice(0, 500), since_last: unsaid }, 'traces could not be exported');
    unsaid = 0;
  };
  const ignore = () => {};
  diag.setLogger(
    {
      error: (message) => warn(String(message)),
      warn: (message) => warn(String(message)),
      info: ignore,
      debug: ignore,
      verbose: ignore,
    },
    { logLevel: DiagLogLevel.WARN, suppressOverrideMessage: true },
  );
}

function samplerOf(config: Config): Sampler {
  const ratio = new TraceIdRatioBasedSampler(config.OTEL_TRACES_SAMPLER_ARG ?? 1);
  switch (config.OTEL_TRACES_SAMPLER) {
    case 'always_on':
      return new AlwaysOnSampler();
    case 'always_off':
      return new AlwaysOffSampler();
    case 'traceidratio':
      return ratio;
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: ratio });
    default:
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
  }
}

export function startOtlpExport(config: Config, url: string, logger: Logger): { shutdown(): Promise<void> } {
  reportExportProblems(logger);
  const exporter = new OTLPTraceExporter({
    url,
    headers: config.OTEL_EXPORTER_OTLP_HEADERS,
    timeoutMillis: config.OTEL_EXPORTER_OTLP_TIMEOUT,
  });
  const provider = new NodeTracerProvider({
    resource: resourceFromAttributes({
      ...config.OTEL_RESOURCE_ATTRIBUTES,
      'service.name': config.OTEL_SERVICE_NAME,
      // Which process of the fleet a span comes from.
      'service.instance.id': randomUUID(),
      'process.pid': process.pid,
    }),
    sampler: samplerOf(config),
    spanProcessors: [
      new BatchSpanProcessor(exporter, {
        ...(config.OTEL_BSP_SCHEDULE_DELAY ? { scheduledDelayMillis: config.OTEL_BSP_SCHEDULE_DELAY } : {}),
      }),
    ],
  });
  provider.register();
  return {
    async shutdown() {
      try {
        await provider.shutdown(); // exports what is still buffered
      } catch (error) {
        // A collector that is down must not make a clean stop look failed (exit code 1).
        logger.warn({ err: error }, 'traces could not be exported');
      } finally {
        // Another opspad in this process (tests, an embedding host) starts from a clean slate.
        trace.disable();
        context.disable();
        propagation.disable();
        diag.disable();
      }
    },
  };
}
