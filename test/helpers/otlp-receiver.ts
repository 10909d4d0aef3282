/**
 * A local OTLP/HTTP trace receiver for tests: accepts `POST /v1/traces` in the JSON encoding (as
 * the http/json exporter sends it, gzip or not) on a loopback port, and keeps every span it is
 * sent, flattened with its resource's attributes. Anything else is answered 404 and kept apart,
 * so a test can tell an exporter that posts elsewhere.
 */
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { gunzipSync } from 'node:zlib';

export type AttributeValue = string | number | boolean;

export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string | undefined;
  name: string;
  /** OTLP's numbers: 1 internal, 2 server, 3 client, 4 producer, 5 consumer. */
  kind: number;
  attributes: Record<string, AttributeValue>;
  /** The attributes of the span's events, all together (what a scan for leaks must cover too). */
  eventAttributes: Record<string, AttributeValue>[];
  resource: Record<string, AttributeValue>;
  scope: string;
}

export const SPAN_KIND = { internal: 1, server: 2, client: 3, producer: 4, consumer: 5 } as const;

interface OtlpKeyValue {
  key: string;
  value: {
    stringValue?: string;
    intValue?: string | number;
    doubleValue?: number;
    boolValue?: boolean;
    arrayValue?: unknown;
  };
}

function attributesOf(list: OtlpKeyValue[] | undefined): Record<string, AttributeValue> {
  const out: Record<string, AttributeValue> = {};
  for (const { key, value } of list ?? []) {
    if (value.stringValue !== undefined) {
      out[key] = value.stringValue;
    } else if (value.intValue !== undefined) {
      out[key] = Number(value.intValue);
    } else if (value.doubleValue !== undefined) {
      out[key] = value.doubleValue;
    } else if (value.boolValue !== undefined) {
      out[key] = value.boolValue;
    } else if (value.arrayValue !== undefined) {
      out[key] = JSON.stringify(value.arrayValue);
    }
  }
  return out;
}

interface OtlpTraces {
  resourceSpans?: {
    resource?: { attributes?: OtlpKeyValue[] };
    scopeSpans?: {
      scope?: { name?: string };
      spans?: {
        traceId: string;
        spanId: string;
        parentSpanId?: string;
        name: string;
        kind: number;
        attributes?: OtlpKeyValue[];
        events?: { attributes?: OtlpKeyValue[] }[];
      }[];
    }[];
  }[];
}

export interface OtlpReceiver {
  /** The base URL, for OTEL_EXPORTER_OTLP_ENDPOINT. */
  url: string;
  spans: ReceivedSpan[];
  /** Requests to any other path or method. */
  strays: string[];
  close(): Promise<void>;
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const strays: string[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      if (req.method !== 'POST' || req.url !== '/v1/traces') {
        strays.push(`${req.method} ${req.url}`);
        res.writeHead(404).end();
        return;
      }
      const raw = Buffer.concat(chunks);
      const body = req.headers['content-encoding'] === 'gzip' ? gunzipSync(raw) : raw;
      const parsed = JSON.parse(body.toString('utf8')) as OtlpTraces;
      for (const resourceSpans of parsed.resourceSpans ?? []) {
        const resource = attributesOf(resourceSpans.resource?.attributes);
        for (const scopeSpans of resourceSpans.scopeSpans ?? []) {
          for (const span of scopeSpans.spans ?? []) {
            spans.push({
              traceId: span.traceId,
              spanId: span.spanId,
              parentSpanId: span.parentSpanId || undefined,
              name: span.name,
              kind: span.kind,
              attributes: attributesOf(span.attributes),
              eventAttributes: (span.events ?? []).map((event) => attributesOf(event.attributes)),
              resource,
              scope: scopeSpans.scope?.name ?? '',
            });
          }
        }
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    spans,
    strays,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
