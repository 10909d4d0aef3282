/**
 * Traces over OTLP/HTTP when OTEL_EXPORTER_OTLP_ENDPOINT (or …_TRACES_ENDPOINT) is set. Unset,
 * nothing is loaded: the OpenTelemetry SDK and exporter are imported only here, on demand, so a
 * process without an endpoint pays neither their start-up time nor their memory, and every span
 * call stays the API's no-op.
 */
import type { Telemetry } from 'bullmq';
import type { Settings } from '../config/env.ts';

/** What tracing reads. */
type Config = Settings<'telemetry'>;

import type { Logger } from '../logger.ts';
import { bullmqTelemetry } from './bullmq-telemetry.ts';

export interface Tracing {
  /** BullMQ's telemetry option, when traces are on; undefined otherwise (BullMQ then does nothing). */
  readonly bullmq: Telemetry | undefined;
  /** Exports the spans not sent yet and unregisters the provider (a no-op when off). */
  shutdown(): Promise<void>;
}

export const TRACING_OFF: Tracing = { bullmq: undefined, shutdown: async () => {} };

/** Where traces go, from the configuration; undefined when they are off. */
export function tracesEndpoint(config: Config): string | undefined {
  if (config.OTEL_SDK_DISABLED) {
    return undefined;
  }
  if (config.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) {
    return config.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT;
  }
  const base = config.OTEL_EXPORTER_OTLP_ENDPOINT;
  return base ? `${base.replace(/\/+$/, '')}/v1/traces` : undefined;
}

/**
 * Starts exporting when an endpoint is configured. `external`: the host application registered
 * an OpenTelemetry SDK of its own; opspad then only adds BullMQ's hook and its spans go there.
 */
export async function startTracing(
  config: Config,
  logger: Logger,
  options: { external?: boolean } = {},
): Promise<Tracing> {
  if (options.external) {
    return { bullmq: bullmqTelemetry(), shutdown: async () => {} };
  }
  const url = tracesEndpoint(config);
  if (!url) {
    return TRACING_OFF;
  }
  const { startOtlpExport } = await import('./otlp-export.ts');
  const exporting = startOtlpExport(config, url, logger);
  const shown = new URL(url);
  logger.info(
    {
      endpoint: `${shown.origin}${shown.pathname}`,
      service: config.OTEL_SERVICE_NAME,
      sampler: config.OTEL_TRACES_SAMPLER,
    },
    'exporting traces over OTLP/HTTP',
  );
  return { bullmq: bullmqTelemetry(), shutdown: exporting.shutdown };
}
