/**
 * opspad's own spans, through `@opentelemetry/api` only. Without a registered tracer provider
 * (no OTLP endpoint, and no host application that registered one) every call here is the API's
 * no-op: no span is recorded and nothing is exported. Spans are per request and per batch, never
 * per item, so tracing costs O(batches) whatever the number of items.
 *
 * Attributes name the organization, operation, operation type and batch size; never item ids
 * (a batch holds up to thousands, and they are the tenant's data) and never credentials.
 */
import { type Attributes, type Span, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';

/** The instrumentation scope of every opspad span. */
export const TRACER_NAME = 'opspad';

/** Attribute keys opspad sets (bounded values: ids, a type name, counts). */
export const ATTR = {
  organizationId: 'opspad.organization.id',
  conversationId: 'opspad.conversation.id',
  operationId: 'opspad.operation.id',
  operationType: 'opspad.operation.type',
  toolName: 'opspad.tool.name',
  toolAction: 'opspad.tool.action',
  batchSize: 'opspad.batch.size',
  lane: 'opspad.lane',
  step: 'opspad.step',
  lanes: 'opspad.lanes',
  completed: 'opspad.items.completed',
  failed: 'opspad.items.failed',
  released: 'opspad.items.released',
  reclaimed: 'opspad.items.reclaimed',
  stoppedBy: 'opspad.batch.stopped_by',
  abandoned: 'opspad.batch.abandoned',
} as const;

export interface SpanSettings {
  kind?: SpanKind;
  attributes?: Attributes;
}

/**
 * Runs `fn` inside a new active span (a child of the active one), which ends when `fn` settles;
 * a throw is recorded on the span, marked as an error, and rethrown.
 */
export function inSpan<T>(name: string, settings: SpanSettings, fn: (span: Span) => Promise<T>): Promise<T> {
  return trace
    .getTracer(TRACER_NAME)
    .startActiveSpan(
      name,
      { kind: settings.kind ?? SpanKind.INTERNAL, attributes: settings.attributes },
      async (span) => {
        try {
          return await fn(span);
        } catch (error) {
          span.recordException(error instanceof Error ? error : String(error));
          span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.message : undefined });
          throw error;
        } finally {
          span.end();
        }
      },
    );
}

/** Adds attributes to the active span (BullMQ's job span inside a processor), if any records. */
export function annotateActiveSpan(attributes: Attributes): void {
  trace.getActiveSpan()?.setAttributes(attributes);
}
