/**
 * A reverse proxy on loopback that adds a Bearer credential to every request and passes the rest
 * through unchanged — the Host and Origin headers included, as a gateway in front of opspad would
 * with `OPSPAD_PUBLIC_URL` set to the proxy's address. Responses stream back as they come (event
 * streams too). For clients that cannot send a header of their own, such as the MCP conformance
 * suite.
 */
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface KeyProxy {
  /** `http://127.0.0.1:<port>` */
  url: string;
  /** Where requests go (set once the server behind is up). */
  target: string | undefined;
  close(): Promise<void>;
}

export async function startKeyProxy(token: () => string): Promise<KeyProxy> {
  const proxy: KeyProxy = { url: '', target: undefined, close: async () => undefined };
  const server = http.createServer((req, res) => {
    if (!proxy.target) {
      res.writeHead(503).end();
      return;
    }
    const target = new URL(proxy.target);
    const upstream = http.request(
      {
        host: target.hostname,
        port: target.port,
        method: req.method,
        path: req.url,
        headers: { ...req.headers, authorization: `Bearer ${token()}` },
      },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    upstream.on('error', () => res.destroy());
    res.on('close', () => upstream.destroy());
    req.pipe(upstream);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  proxy.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  proxy.close = () =>
    new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  return proxy;
}
