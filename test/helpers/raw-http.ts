/**
 * A small keep-alive HTTP client for tests that send thousands of requests, or requests fetch
 * would refuse or rewrite: raw bytes as the body, any method, any header, any Content-Type.
 * Server-sent event streams are answered with their status and headers only (the connection is
 * closed once the headers arrive).
 */
import http from 'node:http';

export interface RawRequest {
  method: string;
  /** Path and query, already percent-encoded where needed. */
  path: string;
  headers?: Record<string, string>;
  body?: string | Buffer;
}

export interface RawResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  text: string;
  /** The body parsed as JSON; undefined when it is not JSON (or is an event stream). */
  json: unknown;
}

export interface RawClient {
  send(request: RawRequest): Promise<RawResponse>;
  close(): void;
}

export function rawClient(baseUrl: string): RawClient {
  const { hostname, port } = new URL(baseUrl);
  const agent = new http.Agent({ keepAlive: true, maxSockets: 8 });
  return {
    send(request) {
      return new Promise((resolve, reject) => {
        const body = request.body === undefined ? undefined : Buffer.from(request.body);
        const req = http.request(
          {
            agent,
            host: hostname,
            port,
            method: request.method,
            path: request.path,
            headers: { ...request.headers, ...(body ? { 'content-length': String(body.length) } : {}) },
          },
          (res) => {
            const status = res.statusCode ?? 0;
            if (String(res.headers['content-type']).startsWith('text/event-stream')) {
              res.destroy();
              resolve({ status, headers: res.headers, text: '', json: undefined });
              return;
            }
            const chunks: Buffer[] = [];
            res.on('data', (chunk: Buffer) => chunks.push(chunk));
            res.on('error', reject);
            res.on('end', () => {
              const text = Buffer.concat(chunks).toString('utf8');
              let json: unknown;
              try {
                json = text ? JSON.parse(text) : undefined;
              } catch {
                json = undefined;
              }
              resolve({ status, headers: res.headers, text, json });
            });
          },
        );
        req.on('error', reject);
        req.end(body);
      });
    },
    close() {
      agent.destroy();
    },
  };
}
