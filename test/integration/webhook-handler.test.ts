/**
 * The webhook handler against a real HTTP server on 127.0.0.1: what it sends (body, headers,
 * a signature receivers can verify) and how each kind of answer maps onto the handler contract
 * (2xx delivered, 429/5xx RetryableError with the Retry-After hint, other 4xx and 3xx
 * ItemError, timeouts and refused connections plain transient errors, an abort passed through).
 *
 * The server routes by path: `/status/<code>` answers with that code, taking `body`, `retry_after`
 * and `location` from the query string; `/hang` reads the request and never answers.
 */
import { createHmac } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type ItemContext, ItemError, RetryableError } from '../../src/handlers/types.ts';
import { createWebhookHandler, verifyWebhookSignature } from '../../src/handlers/webhook.ts';
import { createLogger } from '../../src/logger.ts';

interface RecordedRequest {
  method: string | undefined;
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
}

const SECRET = 'test-webhook-secret';
const logger = createLogger('silent');

let server: Server;
let baseUrl: string;
let requests: RecordedRequest[] = [];
const hanging: ServerResponse[] = [];
/** Called with each request once its body has been read. */
let onRequest: (request: RecordedRequest) => void = () => undefined;

function respond(request: RecordedRequest, res: ServerResponse): void {
  const url = new URL(request.path, 'http://localhost');
  if (url.pathname === '/hang') {
    hanging.push(res);
    return;
  }
  const match = /^\/status\/(\d{3})$/.exec(url.pathname);
  const status = match?.[1] === undefined ? 404 : Number(match[1]);
  const headers: Record<string, string> = { 'content-type': 'text/plain' };
  const retryAfter = url.searchParams.get('retry_after');
  if (retryAfter !== null) {
    headers['retry-after'] = retryAfter;
  }
  const location = url.searchParams.get('location');
  if (location !== null) {
    headers.location = location;
  }
  res.writeHead(status, headers);
  res.end(url.searchParams.get('body') ?? '');
}

/** A request that will be answered by the next request's arrival. */
function nextRequest(): Promise<RecordedRequest> {
  return new Promise((resolve) => {
    onRequest = (request) => {
      onRequest = () => undefined;
      resolve(request);
    };
  });
}

function listen(target: Server): Promise<number> {
  return new Promise((resolve) => {
    target.listen(0, '127.0.0.1', () => resolve((target.address() as AddressInfo).port));
  });
}

function close(target: Server): Promise<void> {
  target.closeAllConnections();
  return new Promise((resolve, reject) => target.close((error) => (error ? reject(error) : resolve())));
}

function itemContext(queryParams: Record<string, unknown>, signal = new AbortController().signal): ItemContext {
  return {
    operationId: 'op-42',
    organizationId: 'org-1',
    operationType: 'webhook',
    queryParams,
    signal,
    logger,
    idempotencyKey: 'op-42:item-7',
    attempt: 1,
  };
}

/** The handler's rejection, for assertions on its class and fields. */
async function rejection(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (error) {
    if (!(error instanceof Error)) {
      throw new Error(`expected an Error, got ${String(error)}`);
    }
    return error;
  }
  throw new Error('expected the handler to reject');
}

beforeAll(async () => {
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const request: RecordedRequest = {
        method: req.method,
        path: req.url ?? '/',
        headers: req.headers,
        body: Buffer.concat(chunks).toString('utf8'),
      };
      requests.push(request);
      respond(request, res);
      onRequest(request);
    });
  });
  const port = await listen(server);
  baseUrl = `http://127.0.0.1:${port}`;
});

beforeEach(() => {
  requests = [];
});

afterAll(async () => {
  for (const res of hanging) {
    res.destroy();
  }
  await close(server);
});

describe('webhook handler: what it sends', () => {
  const handler = createWebhookHandler({ secret: SECRET });

  it('serves the webhook operation type', () => {
    expect(handler.type).toBe('webhook');
  });

  it('POSTs the item as JSON with the idempotency key, timestamp and user agent', async () => {
    const queryParams = { url: `${baseUrl}/status/200`, campaign: 'spring' };
    await expect(handler.handle('item-7', itemContext(queryParams))).resolves.toBeUndefined();

    expect(requests).toHaveLength(1);
    const [request] = requests;
    expect(request?.method).toBe('POST');
    expect(request?.path).toBe('/status/200');
    expect(JSON.parse(request?.body ?? '')).toEqual({
      operation_id: 'op-42',
      item_id: 'item-7',
      query_params: queryParams,
    });
    expect(request?.headers['content-type']).toBe('application/json');
    expect(request?.headers['user-agent']).toBe('opspad-webhook');
    expect(request?.headers['x-opspad-idempotency-key']).toBe('op-42:item-7');
    const timestamp = request?.headers['x-opspad-timestamp'];
    expect(timestamp).toMatch(/^\d+$/);
    expect(Math.abs(Number(timestamp) - Date.now() / 1000)).toBeLessThan(60);
  });

  it('signs "<timestamp>.<body>" with HMAC-SHA256, which verifyWebhookSignature accepts', async () => {
    await handler.handle('item-7', itemContext({ url: `${baseUrl}/status/204` }));
    const [request] = requests;
    const timestamp = String(request?.headers['x-opspad-timestamp']);
    const signature = String(request?.headers['x-opspad-signature']);
    const body = request?.body ?? '';

    const expected = createHmac('sha256', SECRET).update(`${timestamp}.${body}`).digest('hex');
    expect(signature).toBe(`sha256=${expected}`);
    expect(verifyWebhookSignature({ secret: SECRET, timestamp, body, signature })).toBe(true);
    expect(verifyWebhookSignature({ secret: SECRET, timestamp, body: Buffer.from(body), signature })).toBe(true);
  });

  it('has signatures that fail with a wrong secret, a changed body or timestamp, or a malformed header', async () => {
    await handler.handle('item-7', itemContext({ url: `${baseUrl}/status/200` }));
    const [request] = requests;
    const timestamp = String(request?.headers['x-opspad-timestamp']);
    const signature = String(request?.headers['x-opspad-signature']);
    const body = request?.body ?? '';

    expect(verifyWebhookSignature({ secret: 'wrong-secret', timestamp, body, signature })).toBe(false);
    expect(
      verifyWebhookSignature({ secret: SECRET, timestamp, body: body.replace('item-7', 'item-8'), signature }),
    ).toBe(false);
    expect(verifyWebhookSignature({ secret: SECRET, timestamp: Number(timestamp) + 1, body, signature })).toBe(false);
    expect(verifyWebhookSignature({ secret: SECRET, timestamp, body, signature: signature.slice(7) })).toBe(false);
    expect(verifyWebhookSignature({ secret: SECRET, timestamp, body, signature: 'sha256=abc' })).toBe(false);
    expect(verifyWebhookSignature({ secret: SECRET, timestamp, body, signature: undefined })).toBe(false);
    expect(verifyWebhookSignature({ secret: SECRET, timestamp: undefined, body, signature })).toBe(false);
  });

  it('rejects a correctly signed request whose timestamp is outside the tolerance', () => {
    const body = '{"item_id":"x"}';
    const old = String(Math.floor(Date.now() / 1000) - 1000);
    const signature = `sha256=${createHmac('sha256', SECRET).update(`${old}.${body}`).digest('hex')}`;
    expect(verifyWebhookSignature({ secret: SECRET, timestamp: old, body, signature })).toBe(false);
    expect(verifyWebhookSignature({ secret: SECRET, timestamp: old, body, signature, toleranceSeconds: 2000 })).toBe(
      true,
    );
  });

  it('sends no signature header when no secret is configured', async () => {
    const unsigned = createWebhookHandler({ secret: undefined });
    await unsigned.handle('item-7', itemContext({ url: `${baseUrl}/status/200` }));
    expect(requests).toHaveLength(1);
    expect(requests[0]?.headers['x-opspad-signature']).toBeUndefined();
    expect(requests[0]?.headers['x-opspad-idempotency-key']).toBe('op-42:item-7');
  });
});

describe('webhook handler: how answers map onto the contract', () => {
  const handler = createWebhookHandler({ secret: SECRET });

  it('turns a 500 into a RetryableError without a hint', async () => {
    const error = await rejection(handler.handle('item-7', itemContext({ url: `${baseUrl}/status/500?body=boom` })));
    expect(error).toBeInstanceOf(RetryableError);
    expect(error.message).toContain('HTTP 500');
    expect(error.message).toContain('boom');
    expect((error as RetryableError).retryAfterMs).toBeUndefined();
  });

  it('turns a 429 with Retry-After: 2 into a RetryableError retrying after 2000 ms', async () => {
    const error = await rejection(
      handler.handle('item-7', itemContext({ url: `${baseUrl}/status/429?retry_after=2` })),
    );
    expect(error).toBeInstanceOf(RetryableError);
    expect((error as RetryableError).retryAfterMs).toBe(2000);
  });

  it('reads Retry-After as an HTTP date, caps it at 60 s and ignores nonsense', async () => {
    const inThirtySeconds = new Date(Date.now() + 30_000).toUTCString();
    const dated = await rejection(
      handler.handle(
        'i',
        itemContext({ url: `${baseUrl}/status/503?retry_after=${encodeURIComponent(inThirtySeconds)}` }),
      ),
    );
    expect(dated).toBeInstanceOf(RetryableError);
    const datedMs = (dated as RetryableError).retryAfterMs;
    expect(datedMs).toBeGreaterThan(20_000);
    expect(datedMs).toBeLessThanOrEqual(30_000);

    const capped = await rejection(handler.handle('i', itemContext({ url: `${baseUrl}/status/429?retry_after=3600` })));
    expect((capped as RetryableError).retryAfterMs).toBe(60_000);

    const nonsense = await rejection(
      handler.handle('i', itemContext({ url: `${baseUrl}/status/429?retry_after=soon` })),
    );
    expect(nonsense).toBeInstanceOf(RetryableError);
    expect((nonsense as RetryableError).retryAfterMs).toBeUndefined();
  });

  it('turns a 400 into an ItemError quoting the status and the response body', async () => {
    const error = await rejection(
      handler.handle(
        'item-7',
        itemContext({ url: `${baseUrl}/status/400?body=${encodeURIComponent('email is invalid')}` }),
      ),
    );
    expect(error).toBeInstanceOf(ItemError);
    expect((error as ItemError).reason).toBe('HTTP 400: email is invalid');
  });

  it('quotes at most 200 characters of a long error body', async () => {
    const long = 'x'.repeat(5000);
    const error = await rejection(handler.handle('item-7', itemContext({ url: `${baseUrl}/status/422?body=${long}` })));
    expect(error).toBeInstanceOf(ItemError);
    expect((error as ItemError).reason).toBe(`HTTP 422: ${'x'.repeat(200)}`);
  });

  it('does not follow redirects: a 3xx is an ItemError and the target is never called', async () => {
    const error = await rejection(
      handler.handle('item-7', itemContext({ url: `${baseUrl}/status/302?location=/status/200` })),
    );
    expect(error).toBeInstanceOf(ItemError);
    expect((error as ItemError).reason).toContain('HTTP 302');
    expect(requests.map((request) => request.path)).toEqual(['/status/302?location=/status/200']);
  });

  it('turns a server that never answers into a plain transient Error naming the timeout', async () => {
    const quick = createWebhookHandler({ secret: SECRET, timeoutMs: 200 });
    const error = await rejection(quick.handle('item-7', itemContext({ url: `${baseUrl}/hang` })));
    expect(error).not.toBeInstanceOf(ItemError);
    expect(error).not.toBeInstanceOf(RetryableError);
    expect(error.message).toContain('timed out after 200 ms');
    expect(requests).toHaveLength(1);
  });

  it('turns a refused connection into a plain transient Error saying so', async () => {
    const closed = createServer();
    const port = await listen(closed);
    await close(closed);
    const error = await rejection(handler.handle('item-7', itemContext({ url: `http://127.0.0.1:${port}/` })));
    expect(error).not.toBeInstanceOf(ItemError);
    expect(error).not.toBeInstanceOf(RetryableError);
    expect(error.message).toContain('connection refused');
  });

  it('rethrows an abort of ctx.signal mid-request instead of failing the item', async () => {
    const controller = new AbortController();
    const arrived = nextRequest();
    const pending = rejection(handler.handle('item-7', itemContext({ url: `${baseUrl}/hang` }, controller.signal)));
    await arrived;
    const reason = new Error('operation cancelled');
    controller.abort(reason);
    const error = await pending;
    expect(error).toBe(reason);
    expect(error).not.toBeInstanceOf(ItemError);
  });

  it('does not send anything when ctx.signal is already aborted', async () => {
    const controller = new AbortController();
    const reason = new Error('operation paused');
    controller.abort(reason);
    const error = await rejection(
      handler.handle('i', itemContext({ url: `${baseUrl}/status/200` }, controller.signal)),
    );
    expect(error).toBe(reason);
    expect(requests).toHaveLength(0);
  });
});

describe('webhook handler: which URLs it accepts', () => {
  it.each([
    ['a missing url', {}],
    ['a non-string url', { url: 42 }],
    ['a relative url', { url: '/status/200' }],
    ['garbage', { url: 'not a url' }],
    ['an ftp url', { url: 'ftp://127.0.0.1/file' }],
    ['a javascript url', { url: 'javascript:alert(1)' }],
  ])('fails the item for %s', async (_label, queryParams) => {
    const handler = createWebhookHandler({ secret: SECRET });
    const error = await rejection(handler.handle('item-7', itemContext(queryParams)));
    expect(error).toBeInstanceOf(ItemError);
    expect((error as ItemError).reason).toBe('query_params.url must be an http(s) URL');
  });

  it('fails the item, without sending, when allowedHosts does not list the host', async () => {
    const handler = createWebhookHandler({ secret: SECRET, allowedHosts: ['hooks.example.com'] });
    const error = await rejection(handler.handle('item-7', itemContext({ url: `${baseUrl}/status/200` })));
    expect(error).toBeInstanceOf(ItemError);
    expect((error as ItemError).reason).toContain('127.0.0.1');
    expect(requests).toHaveLength(0);
  });

  it('delivers when allowedHosts lists the host', async () => {
    const handler = createWebhookHandler({ secret: SECRET, allowedHosts: ['hooks.example.com', '127.0.0.1'] });
    await expect(handler.handle('item-7', itemContext({ url: `${baseUrl}/status/200` }))).resolves.toBeUndefined();
    expect(requests).toHaveLength(1);
  });

  it('rejects a timeout that is not a positive number when created', () => {
    expect(() => createWebhookHandler({ secret: SECRET, timeoutMs: 0 })).toThrow(RangeError);
  });
});
