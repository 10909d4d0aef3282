/**
 * The receiver of the webhook scenario (webhook.ts), in a process of its own so its work is not
 * the bench's: answers every POST with 204 after `latencyMs`, verifies each signature with the
 * Standard Webhooks library a receiver would use, and counts requests, bad signatures, the most
 * requests it held at once and its own CPU time since it was last configured.
 */
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { cpuUsage } from 'node:process';
import { Webhook } from 'standardwebhooks';
import { serve } from '../../lib/forked-child.ts';

let latencyMs = 20;
let verifier: Webhook | undefined;
const stats = { requests: 0, badSignatures: 0, inFlight: 0, peakInFlight: 0 };
let cpuSince = cpuUsage();

const server = createServer((req, res) => {
  stats.inFlight++;
  stats.peakInFlight = Math.max(stats.peakInFlight, stats.inFlight);
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => chunks.push(chunk));
  req.on('end', () => {
    stats.requests++;
    try {
      verifier?.verify(Buffer.concat(chunks).toString('utf8'), req.headers as Record<string, string>);
    } catch {
      stats.badSignatures++;
    }
    setTimeout(() => {
      stats.inFlight--;
      res.writeHead(204).end();
    }, latencyMs);
  });
});
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1');
await once(server, 'listening');
const { port } = server.address() as AddressInfo;

serve(
  {
    configure(args) {
      latencyMs = Number(args.latencyMs);
      verifier = new Webhook(String(args.secret));
      Object.assign(stats, { requests: 0, badSignatures: 0, peakInFlight: 0 });
      cpuSince = cpuUsage();
      return { url: `http://127.0.0.1:${port}/hook`, host: `127.0.0.1:${port}` };
    },
    stats: () => {
      const cpu = cpuUsage(cpuSince);
      return { ...stats, cpuSeconds: (cpu.user + cpu.system) / 1e6 };
    },
  },
  async () => {
    server.closeAllConnections();
    server.close();
  },
);
