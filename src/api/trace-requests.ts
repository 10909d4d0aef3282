/**
 * One SERVER span per `/v1` request, continuing the caller's trace when it sends a W3C
 * `traceparent` header (an assistant runtime that traces its own tool calls sees opspad's work
 * inside them). The span is named after the route template (`POST /v1/conversations/
 * :conversationId/tools/:toolName`), never the concrete path, so names stay few; the handlers run
 * inside it, so the tool call, the dispatch and the jobs it adds are its descendants. A
 * `tracestate` longer than the specification's 512 characters is dropped by the parser. Without a
 * tracer provider every call here is the OpenTelemetry API's no-op.
 */
import { context, propagation, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import type { RequestHandler } from 'express';
import { TRACER_NAME } from '../telemetry/spans.ts';

export function traceRequests(): RequestHandler {
  return (req, res, next) => {
    // Only the trace context: a caller's `baggage` (up to 8 KB of its choosing) would otherwise
    // ride along in every job of the operation and out to its webhook receivers.
    const carrier = { traceparent: req.get('traceparent'), tracestate: req.get('tracestate') };
    const parent = propagation.extract(context.active(), carrier);
    const span = trace
      .getTracer(TRACER_NAME)
      .startSpan(req.method, { kind: SpanKind.SERVER, attributes: { 'http.request.method': req.method } }, parent);
    res.once('close', () => {
      // Known only once a route matched: the mount path plus the route's own template.
      const route = req.route?.path ? `${req.baseUrl}${String(req.route.path)}` : undefined;
      if (route) {
        span.updateName(`${req.method} ${route}`);
        span.setAttribute('http.route', route);
      }
      span.setAttribute('http.response.status_code', res.statusCode);
      if (res.statusCode >= 500) {
        span.setStatus({ code: SpanStatusCode.ERROR });
      }
      span.end();
    });
    context.with(trace.setSpan(parent, span), next);
  };
}
