/**
 * BullMQ's telemetry hook (the `telemetry` option of every Queue and Worker) over
 * `@opentelemetry/api`. With it, adding a job records a PRODUCER span and stores the W3C trace
 * context in the job's options (`opts.telemetry.metadata`, beside the payload, not in it), and
 * processing the job records a CONSUMER span that continues that context, in whatever process
 * and on whichever backend (Redis or Postgres) the job is taken. Retries of a job keep it.
 *
 * Why not the `bullmq-otel` package, which does the same: its context manager has no `root()`, so
 * BullMQ's long-lived loops (the stalled-job checker) would inherit whatever context started
 * them, and it parses the stored context without a guard, so one job whose metadata is not JSON
 * would fail in the worker. Thirty lines here do both right, with no extra dependency.
 *
 * Why not a traceparent in the job data: the payload schema stays ids only, BullMQ's own spans
 * (add, process, retries) join the same trace, and Bull Board shows the data unchanged.
 */
import {
  type Context,
  context,
  INVALID_SPAN_CONTEXT,
  propagation,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  trace,
} from '@opentelemetry/api';
import type { Span as BullmqSpan, SpanOptions as BullmqSpanOptions, ContextManager, Telemetry, Tracer } from 'bullmq';

function wrap(span: Span): BullmqSpan<Context> {
  return {
    setSpanOnContext: (ctx) => trace.setSpan(ctx, span),
    setAttribute: (key, value) => void span.setAttribute(key, value),
    setAttributes: (attributes) => void span.setAttributes(attributes),
    addEvent: (name, attributes) => void span.addEvent(name, attributes),
    recordException: (exception, time) => span.recordException(exception, time),
    end: () => span.end(),
  };
}

const contextManager: ContextManager<Context> = {
  with: (ctx, fn) => context.with(ctx, fn),
  active: () => context.active(),
  root: () => ROOT_CONTEXT,
  getMetadata(ctx) {
    const carrier: Record<string, string> = {};
    propagation.inject(ctx, carrier);
    return JSON.stringify(carrier);
  },
  fromMetadata(active, metadata) {
    try {
      const carrier: unknown = JSON.parse(metadata);
      return carrier && typeof carrier === 'object' ? propagation.extract(active, carrier) : active;
    } catch {
      return active; // not ours, or damaged: the job runs in a trace of its own
    }
  },
};

/** The telemetry option for opspad's queues and workers. */
export function bullmqTelemetry(): Telemetry<Context> {
  const tracer: Tracer<Context> = {
    startSpan(name: string, options?: BullmqSpanOptions, ctx?: Context) {
      const kind = options?.kind as SpanKind | undefined;
      // BullMQ's housekeeping (stalled-job checks every lock period, timers, close) runs outside
      // any operation: as root spans it would be a steady trickle of one-span traces from every
      // worker, saying nothing about any operation. Only work that belongs to a trace is kept,
      // and job adds and job processing always are.
      if ((kind ?? SpanKind.INTERNAL) === SpanKind.INTERNAL && !trace.getSpan(ctx ?? context.active())) {
        return wrap(trace.wrapSpanContext(INVALID_SPAN_CONTEXT));
      }
      return wrap(trace.getTracer('bullmq').startSpan(name, { kind }, ctx));
    },
  };
  return { tracer, contextManager };
}
