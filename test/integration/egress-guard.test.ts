/**
 * The egress guard against a listener of our own on 127.0.0.1: every spelling of a local
 * address a tenant might try is refused before a byte is sent, reasons never carry what the
 * listener would answer, names are checked on the address the socket actually connects to (an
 * injected resolver plays DNS: names under `.test` never resolve for real, so a delivery proves
 * the socket used the guard's answer), and an allow-list entry lets exactly one listener through.
 *
 * Non-loopback addresses (10.0.0.1, 169.254.169.254, fd00:ec2::254, …) are only ever checked
 * without connecting (checkUrl, lookupFor): a test must not send traffic off this machine.
 */
import { getEventListeners, once } from 'node:events';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createEgressGuard, EgressError, type ResolvedAddress, type Resolver } from '../../src/egress/index.ts';
import { type ItemContext, ItemError } from '../../src/handlers/types.ts';
import { createWebhookHandler } from '../../src/handlers/webhook.ts';
import { createLogger } from '../../src/logger.ts';
import { newWebhookSecret } from '../../src/store/index.ts';

const LISTENER_BODY = 'listener-body-7d1e: ssh-rsa AAAA internal';

interface Listener {
  server: Server;
  port: number;
  received: string[];
}

async function startListener(): Promise<Listener> {
  const received: string[] = [];
  const server = createServer((req, res) => {
    received.push(req.url ?? '/');
    req.resume();
    // `connection: close`: every request opens a new socket, so every one goes through lookup.
    res.writeHead(404, { location: 'http://10.0.0.1/', 'x-internal': LISTENER_BODY, connection: 'close' });
    res.end(LISTENER_BODY);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, port: (server.address() as AddressInfo).port, received };
}

async function stopListener(listener: Listener): Promise<void> {
  listener.server.closeAllConnections();
  await new Promise((resolve) => listener.server.close(resolve));
}

function itemContext(url: string): ItemContext {
  return {
    operationId: '0b4f2a8e-1c3d-4e5f-8a9b-0c1d2e3f4a5b',
    organizationId: '9e8d7c6b-5a49-4382-b1a0-f9e8d7c6b5a4',
    operationType: 'webhook',
    queryParams: { url },
    signal: new AbortController().signal,
    logger: createLogger('silent'),
    idempotencyKey: 'unused',
    attempt: 1,
  };
}

async function failure(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected a rejection');
}

/** A resolver that answers `answers` in turn (the last one again when they run out). */
function scriptedResolver(...answers: ResolvedAddress[][]): Resolver & { calls: string[] } {
  const calls: string[] = [];
  const resolve = async (hostname: string) => {
    calls.push(hostname);
    return answers[Math.min(calls.length - 1, answers.length - 1)] ?? [];
  };
  return Object.assign(resolve, { calls });
}

const v4 = (address: string): ResolvedAddress => ({ address, family: 4 });

let listener: Listener;
let other: Listener;

beforeAll(async () => {
  listener = await startListener();
  other = await startListener();
});
beforeEach(() => {
  listener.received.length = 0;
  other.received.length = 0;
});
afterAll(async () => {
  await stopListener(listener);
  await stopListener(other);
});

describe('every spelling of this machine is refused, and the listener receives nothing', () => {
  const forms = (port: number) => [
    `http://127.0.0.1:${port}/`,
    `http://127.1:${port}/`,
    `http://2130706433:${port}/`,
    `http://0x7f000001:${port}/`,
    `http://0177.0.0.1:${port}/`,
    `http://%31%32%37.0.0.1:${port}/`,
    `http://127.0.0.1.:${port}/`,
    `http://0.0.0.0:${port}/`,
    `http://0:${port}/`,
    `http://[::1]:${port}/`,
    `http://[::ffff:127.0.0.1]:${port}/`,
    `http://[::ffff:7f00:1]:${port}/`,
    `http://[0:0:0:0:0:ffff:7f00:1]:${port}/`,
    `http://[64:ff9b::7f00:1]:${port}/`,
    `http://localhost:${port}/`,
    `http://LOCALHOST.:${port}/`,
    `http://sub.localhost:${port}/`,
  ];

  it('through the webhook handler: "address not allowed", no trace of the listener in the reason', async () => {
    const handler = createWebhookHandler({ signingSecrets: async () => [newWebhookSecret()] });
    for (const url of forms(listener.port)) {
      const error = await failure(handler.handle('item-1', itemContext(url)));
      expect(error, url).toBeInstanceOf(ItemError);
      expect((error as ItemError).reason, url).toBe('address not allowed');
    }
    expect(listener.received).toEqual([]);
  });

  it('at create: every form (localhost and its subdomains too) is a problem naming query_params.url', () => {
    const handler = createWebhookHandler({ signingSecrets: async () => [newWebhookSecret()] });
    for (const url of forms(listener.port)) {
      const [issue] = handler.checkQueryParams?.({ url }) ?? [];
      expect(issue?.field, url).toBe('query_params.url');
      expect(issue?.message, url).toMatch(/only public addresses may be called/);
      expect(issue?.message, url).not.toContain(LISTENER_BODY);
    }
  });
});

describe('addresses off this machine are refused without connecting', () => {
  const guard = createEgressGuard();

  it.each([
    ['http://10.0.0.1/', 'a private (RFC 1918) address'],
    ['http://172.16.5.4/', 'a private (RFC 1918) address'],
    ['http://192.168.1.1/', 'a private (RFC 1918) address'],
    ['http://100.64.0.1/', 'carrier-grade NAT'],
    ['http://169.254.169.254/latest/meta-data/', 'link-local'],
    ['http://[fd00:ec2::254]/', 'unique-local'],
    ['http://[fe80::1]/', 'link-local'],
    ['http://[::ffff:169.254.169.254]/', 'link-local'],
    ['http://[::ffff:a00:1]/', 'a private (RFC 1918) address'],
    ['http://224.0.0.1/', 'multicast'],
    ['http://255.255.255.255/', 'reserved'],
    ['https://0251.0376.0251.0376/', 'link-local'],
  ])('%s is refused by checkUrl (%s)', (url, phrase) => {
    const checked = guard.checkUrl(url);
    expect(checked.ok).toBe(false);
    expect(!checked.ok && checked.problem).toBe('address_not_allowed');
    expect(!checked.ok && checked.message).toContain(phrase);
  });

  it('request() refuses a literal blocked address before connecting', async () => {
    const error = await failure(
      guard.request('http://[fd00:ec2::254]/', { method: 'POST', headers: {}, timeoutMs: 1000 }),
    );
    expect(error).toBeInstanceOf(EgressError);
    expect((error as EgressError).code).toBe('address_not_allowed');
  });

  it('lets public literal addresses pass the static check', () => {
    expect(guard.checkUrl('https://93.184.216.34/hook').ok).toBe(true);
    expect(guard.checkUrl('https://[2606:4700:4700::1111]/hook').ok).toBe(true);
    expect(guard.checkUrl('https://hooks.example.com/hook').ok).toBe(true);
  });
});

describe('names are checked on the address actually connected to', () => {
  /** Calls the guard's lookup the way net.connect does, without connecting. */
  function lookup(guard: ReturnType<typeof createEgressGuard>, all: boolean) {
    return new Promise<{ error: Error | null; address: unknown }>((resolve) => {
      guard.lookupFor('hooks.test', 443)('hooks.test', { all }, (error, address) => resolve({ error, address }));
    });
  }

  it('a name that resolves to a public address, then to a private one, is refused the second time', async () => {
    const resolver = scriptedResolver([v4('93.184.216.34')], [v4('10.0.0.1')]);
    const guard = createEgressGuard({ resolve: resolver });
    const first = await lookup(guard, false);
    expect(first).toEqual({ error: null, address: '93.184.216.34' });
    const second = await lookup(guard, false);
    expect(second.error).toBeInstanceOf(EgressError);
    expect((second.error as EgressError).code).toBe('address_not_allowed');
    expect(resolver.calls).toEqual(['hooks.test', 'hooks.test']);
  });

  it('hands the socket only the public answers of a name that has both kinds', async () => {
    const guard = createEgressGuard({
      resolve: scriptedResolver([v4('10.0.0.1'), v4('93.184.216.34'), { address: 'fd00::1', family: 6 }]),
    });
    expect(await lookup(guard, true)).toEqual({ error: null, address: [{ address: '93.184.216.34', family: 4 }] });
  });

  it('refuses a name that resolves to this machine: the listener receives nothing', async () => {
    const handler = createWebhookHandler({
      signingSecrets: async () => [newWebhookSecret()],
      guard: createEgressGuard({ resolve: scriptedResolver([v4('127.0.0.1')]) }),
    });
    const error = await failure(handler.handle('item-1', itemContext(`http://hooks.test:${listener.port}/`)));
    expect((error as ItemError).reason).toBe('address not allowed');
    expect(listener.received).toEqual([]);
  });

  it('checks https the same way: the name goes through the guard, the refused address gets no connection', async () => {
    const resolver = scriptedResolver([v4('127.0.0.1')]);
    const guard = createEgressGuard({ resolve: resolver });
    const error = await failure(
      guard.request(`https://hooks.test:${listener.port}/`, { method: 'POST', headers: {}, timeoutMs: 5000 }),
    );
    expect((error as EgressError).code).toBe('address_not_allowed');
    expect(resolver.calls).toEqual(['hooks.test']);
    expect(listener.received).toEqual([]);
  });

  it('connects where the guard says (a .test name reaches the listener once allowed), and re-checks every connection', async () => {
    const resolver = scriptedResolver([v4('127.0.0.1')], [v4('169.254.169.254')]);
    const handler = createWebhookHandler({
      signingSecrets: async () => [newWebhookSecret()],
      guard: createEgressGuard({ resolve: resolver, allow: [`127.0.0.1:${listener.port}`] }),
    });
    const url = `http://hooks.test:${listener.port}/rebind`;
    // The listener answers 404: a permanent failure, but it arrived.
    const delivered = await failure(handler.handle('item-1', itemContext(url)));
    expect((delivered as ItemError).reason).toBe('HTTP 404 from the receiver');
    expect(listener.received).toEqual(['/rebind']);

    const refused = await failure(handler.handle('item-2', itemContext(url)));
    expect((refused as ItemError).reason).toBe('address not allowed');
    expect(listener.received).toEqual(['/rebind']);
    expect(resolver.calls).toHaveLength(2);
  });
});

describe('OPSPAD_WEBHOOK_ALLOW', () => {
  it('127.0.0.1:<port> lets exactly that listener through', async () => {
    const handler = createWebhookHandler({
      signingSecrets: async () => [newWebhookSecret()],
      guard: createEgressGuard({ allow: [`127.0.0.1:${listener.port}`] }),
    });
    const allowed = await failure(handler.handle('item-1', itemContext(`http://127.0.0.1:${listener.port}/in`)));
    expect((allowed as ItemError).reason).toBe('HTTP 404 from the receiver');
    expect((allowed as ItemError).reason).not.toContain(LISTENER_BODY);

    const otherPort = await failure(handler.handle('item-1', itemContext(`http://127.0.0.1:${other.port}/out`)));
    expect((otherPort as ItemError).reason).toBe('address not allowed');
    const ipv6 = await failure(handler.handle('item-1', itemContext(`http://[::1]:${listener.port}/out`)));
    expect((ipv6 as ItemError).reason).toBe('address not allowed');

    expect(listener.received).toEqual(['/in']);
    expect(other.received).toEqual([]);
    expect(handler.checkQueryParams?.({ url: `http://127.0.0.1:${listener.port}/` })).toEqual([]);
    expect(handler.checkQueryParams?.({ url: `http://127.0.0.1:${other.port}/` })?.[0]?.field).toBe('query_params.url');
  });
});

describe('the exchange: one budget, one abort, a bounded drain', () => {
  /** A server on 127.0.0.1 that hands each response to `respond` once the body is read. */
  async function serve(respond: (res: ServerResponse) => void): Promise<{ server: Server; port: number }> {
    const server = createServer((req, res) => {
      req.resume();
      req.on('end', () => respond(res));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return { server, port: (server.address() as AddressInfo).port };
  }
  async function stop(server: Server): Promise<void> {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }

  it('stops at the budget while the name is still being resolved, without connecting', async () => {
    const guard = createEgressGuard({ resolve: () => new Promise(() => undefined) });
    const error = await failure(
      guard.request(`http://hooks.test:${listener.port}/`, { method: 'POST', headers: {}, timeoutMs: 50 }),
    );
    expect((error as EgressError).code).toBe('timeout');
    expect(listener.received).toEqual([]);
    guard.close();
  });

  it('sends nothing when the name resolves after the budget: the late connection is closed unused', async () => {
    let answer: (addresses: ResolvedAddress[]) => void = () => undefined;
    let asked: () => void = () => undefined;
    const lookupStarted = new Promise<void>((resolve) => {
      asked = resolve;
    });
    const guard = createEgressGuard({
      allow: [`127.0.0.1:${listener.port}`],
      resolve: () =>
        new Promise((resolve) => {
          answer = resolve;
          asked();
        }),
    });
    const pending = failure(
      guard.request(`http://hooks.test:${listener.port}/late`, { method: 'POST', headers: {}, timeoutMs: 20 }),
    );
    await lookupStarted;
    expect(((await pending) as EgressError).code).toBe('timeout');
    const connected = once(listener.server, 'connection');
    answer([v4('127.0.0.1')]);
    const [socket] = (await connected) as [Socket];
    await once(socket, 'close');
    expect(listener.received).toEqual([]);
    guard.close();
  });

  it('answers with the final status after interim ones (103 Early Hints)', async () => {
    const { server, port } = await serve((res) => {
      res.writeEarlyHints({ link: '</hook.css>; rel=preload' });
      res.writeHead(204).end();
    });
    const guard = createEgressGuard({ allow: [`127.0.0.1:${port}`] });
    const response = await guard.request(`http://127.0.0.1:${port}/`, { method: 'POST', headers: {}, timeoutMs: 5000 });
    expect(response.status).toBe(204);
    guard.close();
    await stop(server);
  });

  it('listens once on a shared signal, and its abort stops every request waiting on it', async () => {
    const held: ServerResponse[] = [];
    let arrived: () => void = () => undefined;
    const allArrived = new Promise<void>((resolve) => {
      arrived = resolve;
    });
    const { server, port } = await serve((res) => {
      held.push(res);
      if (held.length === 20) {
        arrived();
      }
    });
    const guard = createEgressGuard({ allow: [`127.0.0.1:${port}`] });
    const controller = new AbortController();
    const pending = Array.from({ length: 20 }, (_, i) =>
      failure(
        guard.request(`http://127.0.0.1:${port}/${i}`, {
          method: 'POST',
          headers: {},
          timeoutMs: 60_000,
          signal: controller.signal,
        }),
      ),
    );
    await allArrived;
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(1);
    const closed = held.map((res) => once(res, 'close'));
    const reason = new Error('batch paused');
    controller.abort(reason);
    for (const error of await Promise.all(pending)) {
      expect(error).toBe(reason);
    }
    // Every socket was closed by the guard: the server never answered.
    await Promise.all(closed);
    expect(held.every((res) => !res.headersSent)).toBe(true);
    guard.close();
    await stop(server);
  });

  it('reads at most maxDrainBytes of an answer, then closes the socket', async () => {
    let finished: Promise<boolean> = Promise.resolve(true);
    const { server, port } = await serve((res) => {
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      const chunk = Buffer.alloc(64 * 1024, 'x');
      // Up to 256 MiB, written as the client takes it: more than any socket buffer holds.
      let left = 4096;
      const pump = () => {
        while (left > 0) {
          left--;
          if (!res.write(chunk)) {
            res.once('drain', pump);
            return;
          }
        }
        res.end();
      };
      finished = once(res, 'close').then(() => res.writableFinished);
      pump();
    });
    const guard = createEgressGuard({ allow: [`127.0.0.1:${port}`], maxDrainBytes: 1024 });
    const response = await guard.request(`http://127.0.0.1:${port}/`, {
      method: 'POST',
      headers: {},
      timeoutMs: 60_000,
    });
    expect(response.status).toBe(200);
    expect(await finished).toBe(false);
    guard.close();
    await stop(server);
  });
});
