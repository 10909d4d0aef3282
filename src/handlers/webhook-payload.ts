/**
 * What the webhook handler sends, and what it accepts in `query_params`.
 *
 * The body is small whatever `query_params` holds: the ids the receiver needs to act and dedupe,
 * and `query_params.payload`, an object the tenant chooses to send with every item, at most
 * {@link MAX_WEBHOOK_PAYLOAD_BYTES} of JSON. Nothing else of `query_params` leaves opspad (it is
 * the operation's own record: the filter, notes, maybe tokens), and the URL is not repeated.
 *
 * ```json
 * {"type": "operation.item", "timestamp": "2030-01-01T00:00:00.000Z",
 *  "data": {"organization_id": "…", "operation_id": "…", "operation_type": "webhook",
 *           "item_id": "contact-7", "attempt": 1, "payload": {"template": "spring"}}}
 * ```
 */
import type { EgressGuard } from '../egress/index.ts';
import type { QueryParamsIssue } from './types.ts';

/** `query_params.payload` goes out with every item: a million items multiply it a million times. */
export const MAX_WEBHOOK_PAYLOAD_BYTES = 4096;

export const WEBHOOK_EVENT_TYPE = 'operation.item';

/** The size of `payload` as JSON, in bytes. */
function payloadBytes(payload: unknown): number {
  return Buffer.byteLength(JSON.stringify(payload) ?? '', 'utf8');
}

/** Problems with a webhook operation's query_params, each naming its field; empty when usable. */
export function webhookQueryParamsIssues(
  queryParams: Readonly<Record<string, unknown>>,
  guard: EgressGuard,
): QueryParamsIssue[] {
  const issues: QueryParamsIssue[] = [];
  const checked = guard.checkUrl(queryParams.url);
  if (!checked.ok) {
    issues.push({
      field: 'query_params.url',
      message:
        checked.problem === 'not_http'
          ? 'must be an http(s) URL, e.g. https://hooks.example.com/opspad: the webhook handler POSTs each item there'
          : checked.message,
    });
  }
  const { payload } = queryParams;
  if (payload !== undefined && payload !== null) {
    if (typeof payload !== 'object' || Array.isArray(payload)) {
      issues.push({
        field: 'query_params.payload',
        message: 'must be an object (sent with every item as data.payload)',
      });
    } else if (payloadBytes(payload) > MAX_WEBHOOK_PAYLOAD_BYTES) {
      issues.push({
        field: 'query_params.payload',
        message: `is ${payloadBytes(payload)} bytes of JSON; at most ${MAX_WEBHOOK_PAYLOAD_BYTES} are sent with every item. Send what every item needs and let the receiver look up the rest by item_id.`,
      });
    }
  }
  return issues;
}

export interface WebhookBodyInput {
  organizationId: string;
  operationId: string;
  operationType: string;
  itemId: string;
  attempt: number;
  /** Unix seconds: the same instant as the webhook-timestamp header. */
  timestamp: number;
  payload: unknown;
}

/** The request body, as the bytes that are signed and sent. */
export function webhookBody(input: WebhookBodyInput): Buffer {
  return Buffer.from(
    JSON.stringify({
      type: WEBHOOK_EVENT_TYPE,
      timestamp: new Date(input.timestamp * 1000).toISOString(),
      data: {
        organization_id: input.organizationId,
        operation_id: input.operationId,
        operation_type: input.operationType,
        item_id: input.itemId,
        attempt: input.attempt,
        payload: input.payload ?? null,
      },
    }),
    'utf8',
  );
}
