/**
 * The webhook handler against a real HTTP server on 127.0.0.1 (let through the egress guard by
 * an allow-list entry for exactly its port): what it sends (a small body, Standard Webhooks
 * headers that the `standardwebhooks` package verifies, ASCII whatever the item id) and how each
 * kind of answer maps onto the handler contract, with reasons that never quote the receiver.
 *
 * The server routes by path: `/status/<code>` answers with that code, taking `body`,
 * `retry_after` and `location` from the query string; `/hang` reads the request and never
 * answers; `/big` answers 200 with 4 MiB.
 */
import { createHmac } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook, WebhookVerificationError } from 'standardwebhooks';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createEgressGuard } from '../../src/egress/index.ts';
import { type ItemContext, ItemError, RetryableError } from '../../src/handlers/types.ts';
import { createWebhookHandler } from '../../src/handlers/webhook.ts';
import { createLogger } from '../../src/logger.ts';
import { newWebhookSecret } from '../../src/store/index.ts';

interface RecordedRequest {
  method: string | undefined;
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
}

const SECRET = newWebhookSecret();
const OTHER_SECRET = newWebhookSecret();
const RECEIVER_BODY = 'receiver-private-detail-1f9c';
const logger = createLogger('silent');

let server: Server;
let port: number;
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
  if (url.pathname === '/big') {
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.end(Buffer.alloc(4 * 1024 * 1024, 'x'));
    return;
  }
  const match = /^\/status\/(\d{3})$/.exec(url.pathname);
  const status = match?.[1] === undefined ? 404 : Number(match[1]);
  const headers: Record<string, string> = { 'content-type': 'text/plain', 'x-receiver-secret': RECEIVER_BODY };
  const retryAfter = url.searchParams.get('retry_after');
  if (retryAfter !== null) {
    headers['retry-after'] = retryAfter;
  }
  const location = url.searchParams.get('location');
  if (location !== null) {
    headers.location = location;
  }
  res.writeHead(status, headers);
  res.end(url.searchParams.get('body') ?? RECEIVER_BODY);
}

/** Resolves with the next request to arrive. */
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

function itemContext(
  queryParams: Record<string, unknown>,
  overrides: Partial<ItemContext> = {},
  signal = new AbortController().signal,
): ItemContext {
  return {
    operationId: '0b4f2a8e-1c3d-4e5f-8a9b-0c1d2e3f4a5b',
    organizationId: '9e8d7c6b-5a49-4382-b1a0-f9e8d7c6b5a4',
    operationType: 'webhook',
    queryParams,
    signal,
    logger,
    idempotencyKey: 'unused',
    attempt: 1,
    ...overrides,
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

/** A handler that may call the test server (and nothing else non-public). */
function handlerFor(secrets: readonly string[] = [SECRET], timeoutMs?: number) {
  return createWebhookHandler({
    signingSecrets: async () => secrets,
    guard: createEgressGuard({ allow: [`127.0.0.1:${port}`] }),
    timeoutMs,
    secretCacheMs: 0,
  });
}

/** The headers standardwebhooks reads, as received. */
function signedHeaders(request: RecordedRequest | undefined): Record<string, string> {
  return {
    'webhook-id': String(request?.headers['webhook-id']),
    'webhook-timestamp': String(request?.headers['webhook-timestamp']),
    'webhook-signature': String(request?.headers['webhook-signature']),
  };
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
  port = await listen(server);
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
  const handler = () => handlerFor();

  it('serves the webhook operation type', () => {
    expect(handler().type).toBe('webhook');
  });

  it('POSTs a small JSON body naming the organization, and only query_params.payload of the params', async () => {
    const queryParams = {
      url: `${baseUrl}/status/200`,
      payload: { template: 'spring' },
      campaign_filter: 'x'.repeat(50_000),
      api_token: 'never-sent',
    };
    await handler().handle('item-7', itemContext(queryParams, { attempt: 2 }));

    expect(requests).toHaveLength(1);
    const [request] = requests;
    expect(request?.method).toBe('POST');
    expect(request?.path).toBe('/status/200');
    const body = JSON.parse(request?.body ?? '') as { timestamp: string };
    expect(body).toEqual({
      type: 'operation.item',
      timestamp: new Date(Number(request?.headers['webhook-timestamp']) * 1000).toISOString(),
      data: {
        organization_id: '9e8d7c6b-5a49-4382-b1a0-f9e8d7c6b5a4',
        operation_id: '0b4f2a8e-1c3d-4e5f-8a9b-0c1d2e3f4a5b',
        operation_type: 'webhook',
        item_id: 'item-7',
        attempt: 2,
        payload: { template: 'spring' },
      },
    });
    expect(request?.body.length).toBeLessThan(400);
    expect(request?.body).not.toContain('never-sent');
    expect(request?.headers['content-type']).toBe('application/json');
    expect(request?.headers['user-agent']).toBe('opspad-webhook');
    expect(Math.abs(Number(request?.headers['webhook-timestamp']) - Date.now() / 1000)).toBeLessThan(60);
  });

  it('signs per the Standard Webhooks spec, which the standardwebhooks package verifies', async () => {
    await handler().handle('item-7', itemContext({ url: `${baseUrl}/status/204` }));
    const [request] = requests;
    const headers = signedHeaders(request);
    const body = request?.body ?? '';

    const key = Buffer.from(SECRET.slice('whsec_'.length), 'base64');
    const expected = createHmac('sha256', key)
      .update(`${headers['webhook-id']}.${headers['webhook-timestamp']}.${body}`)
      .digest('base64');
    expect(headers['webhook-signature']).toBe(`v1,${expected}`);
    expect(new Webhook(SECRET).verify(body, headers)).toMatchObject({ data: { item_id: 'item-7' } });
    expect(() => new Webhook(OTHER_SECRET).verify(body, headers)).toThrow(WebhookVerificationError);
    expect(() => new Webhook(SECRET).verify(body.replace('item-7', 'item-8'), headers)).toThrow(
      WebhookVerificationError,
    );
  });

  it('keeps webhook-id across retries of one item, and changes it for another item or operation', async () => {
    const queryParams = { url: `${baseUrl}/status/200` };
    await handler().handle('item-7', itemContext(queryParams, { attempt: 1 }));
    await handler().handle('item-7', itemContext(queryParams, { attempt: 2 }));
    await handler().handle('item-8', itemContext(queryParams));
    await handler().handle('item-7', itemContext(queryParams, { operationId: 'f0e1d2c3-b4a5-4697-8877-665544332211' }));
    const ids = requests.map((request) => request.headers['webhook-id']);
    expect(ids[0]).toMatch(/^msg_[0-9a-f]{32}$/);
    expect(ids[1]).toBe(ids[0]);
    expect(new Set(ids).size).toBe(3);
  });

  it.each([
    ['an emoji', 'contact-😀'],
    ['CR and LF', 'contact\r\nx-injected: 1'],
    ['an accented letter', 'café'],
    ['CJK', '連絡先-7'],
  ])(
    'delivers an item id with %s: ASCII headers, the id in the body, a signature that verifies',
    async (_l, itemId) => {
      await handler().handle(itemId, itemContext({ url: `${baseUrl}/status/200` }));
      const [request] = requests;
      for (const value of Object.values(signedHeaders(request))) {
        expect(value).toMatch(/^[\x20-\x7e]+$/);
      }
      expect(request?.headers['x-injected']).toBeUndefined();
      const verified = new Webhook(SECRET).verify(request?.body ?? '', signedHeaders(request)) as {
        data: { item_id: string };
      };
      expect(verified.data.item_id).toBe(itemId);
    },
  );

  it('sends one signature per secret during a rotation; either secret verifies alone', async () => {
    await handlerFor([SECRET, OTHER_SECRET]).handle('item-7', itemContext({ url: `${baseUrl}/status/200` }));
    const [request] = requests;
    const headers = signedHeaders(request);
    expect(String(headers['webhook-signature']).split(' ')).toHaveLength(2);
    expect(new Webhook(SECRET).verify(request?.body ?? '', headers)).toBeTruthy();
    expect(new Webhook(OTHER_SECRET).verify(request?.body ?? '', headers)).toBeTruthy();
    expect(() => new Webhook(newWebhookSecret()).verify(request?.body ?? '', headers)).toThrow(
      WebhookVerificationError,
    );
  });
});

describe('webhook handler: how answers map onto the contract', () => {
  const handler = () => handlerFor();

  it('turns a 500 into a RetryableError with a fixed reason, without the body or headers', async () => {
    const error = await rejection(handler().handle('item-7', itemContext({ url: `${baseUrl}/status/500` })));
    expect(error).toBeInstanceOf(RetryableError);
    expect(error.message).toBe('HTTP 500 from the receiver');
    expect((error as RetryableError).retryAfterMs).toBeUndefined();
  });

  it('turns a 429 with Retry-After: 2 into a RetryableError retrying after 2000 ms', async () => {
    const error = await rejection(
      handler().handle('item-7', itemContext({ url: `${baseUrl}/status/429?retry_after=2` })),
    );
    expect(error).toBeInstanceOf(RetryableError);
    expect((error as RetryableError).retryAfterMs).toBe(2000);
  });

  it('reads Retry-After as an HTTP date, caps it at 60 s and ignores nonsense', async () => {
    const inThirtySeconds = new Date(Date.now() + 30_000).toUTCString();
    const dated = await rejection(
      handler().handle(
        'i',
        itemContext({ url: `${baseUrl}/status/503?retry_after=${encodeURIComponent(inThirtySeconds)}` }),
      ),
    );
    expect(dated).toBeInstanceOf(RetryableError);
    const datedMs = (dated as RetryableError).retryAfterMs;
    expect(datedMs).toBeGreaterThan(20_000);
    expect(datedMs).toBeLessThanOrEqual(30_000);

    const capped = await rejection(
      handler().handle('i', itemContext({ url: `${baseUrl}/status/429?retry_after=3600` })),
    );
    expect((capped as RetryableError).retryAfterMs).toBe(60_000);

    const nonsense = await rejection(
      handler().handle('i', itemContext({ url: `${baseUrl}/status/429?retry_after=soon` })),
    );
    expect(nonsense).toBeInstanceOf(RetryableError);
    expect((nonsense as RetryableError).retryAfterMs).toBeUndefined();
  });

  it('turns a 400 into an ItemError with the status only, never the response body', async () => {
    const error = await rejection(
      handler().handle(
        'item-7',
        itemContext({ url: `${baseUrl}/status/400?body=${encodeURIComponent('internal: db at 10.0.0.5')}` }),
      ),
    );
    expect(error).toBeInstanceOf(ItemError);
    expect((error as ItemError).reason).toBe('HTTP 400 from the receiver');
  });

  it('does not follow redirects or quote their Location: a 3xx is an ItemError, the target never called', async () => {
    const location = 'http://169.254.169.254/latest/meta-data/';
    const error = await rejection(
      handler().handle(
        'item-7',
        itemContext({ url: `${baseUrl}/status/302?location=${encodeURIComponent(location)}` }),
      ),
    );
    expect(error).toBeInstanceOf(ItemError);
    expect((error as ItemError).reason).toBe('HTTP 302 from the receiver (redirects are not followed)');
    expect(requests).toHaveLength(1);
  });

  it('delivers on a 2xx whose body is huge, without waiting for it', async () => {
    await expect(handler().handle('item-7', itemContext({ url: `${baseUrl}/big` }))).resolves.toBeUndefined();
    expect(requests).toHaveLength(1);
  });

  it('turns a server that never answers into a plain transient Error naming the timeout', async () => {
    const error = await rejection(handlerFor([SECRET], 200).handle('item-7', itemContext({ url: `${baseUrl}/hang` })));
    expect(error).not.toBeInstanceOf(ItemError);
    expect(error).not.toBeInstanceOf(RetryableError);
    expect(error.message).toBe('timed out after 200 ms');
    expect(requests).toHaveLength(1);
  });

  it('turns a refused connection (on an allowed address) into a plain transient Error saying so', async () => {
    const closed = createServer();
    const closedPort = await listen(closed);
    await close(closed);
    const handler = createWebhookHandler({
      signingSecrets: async () => [SECRET],
      guard: createEgressGuard({ allow: [`127.0.0.1:${closedPort}`] }),
    });
    const error = await rejection(handler.handle('item-7', itemContext({ url: `http://127.0.0.1:${closedPort}/` })));
    expect(error).not.toBeInstanceOf(ItemError);
    expect(error).not.toBeInstanceOf(RetryableError);
    expect(error.message).toBe('connection refused');
  });

  it('rethrows an abort of ctx.signal mid-request instead of failing the item', async () => {
    const controller = new AbortController();
    const arrived = nextRequest();
    const pending = rejection(
      handler().handle('item-7', itemContext({ url: `${baseUrl}/hang` }, {}, controller.signal)),
    );
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
      handler().handle('i', itemContext({ url: `${baseUrl}/status/200` }, {}, controller.signal)),
    );
    expect(error).toBe(reason);
    expect(requests).toHaveLength(0);
  });

  it('retries (plain Error) when the secrets cannot be read, without sending', async () => {
    const handler = createWebhookHandler({
      signingSecrets: async () => {
        throw new Error('database unavailable');
      },
      guard: createEgressGuard({ allow: [`127.0.0.1:${port}`] }),
    });
    const error = await rejection(handler.handle('i', itemContext({ url: `${baseUrl}/status/200` })));
    expect(error).not.toBeInstanceOf(ItemError);
    expect(requests).toHaveLength(0);
  });
});

describe('webhook handler: which query_params it accepts', () => {
  it.each([
    ['a missing url', {}],
    ['a non-string url', { url: 42 }],
    ['a relative url', { url: '/status/200' }],
    ['garbage', { url: 'not a url' }],
    ['an ftp url', { url: 'ftp://127.0.0.1/file' }],
    ['a javascript url', { url: 'javascript:alert(1)' }],
  ])('fails the item for %s, and names query_params.url at create', async (_label, queryParams) => {
    const handler = handlerFor();
    const error = await rejection(handler.handle('item-7', itemContext(queryParams)));
    expect(error).toBeInstanceOf(ItemError);
    expect((error as ItemError).reason).toBe('query_params.url must be an http(s) URL');
    expect(handler.checkQueryParams?.(queryParams).map((issue) => issue.field)).toEqual(['query_params.url']);
    expect(requests).toHaveLength(0);
  });

  it('refuses credentials in the URL without repeating them', async () => {
    const handler = handlerFor();
    const queryParams = { url: `http://admin:hunter2@127.0.0.1:${port}/status/200` };
    const error = await rejection(handler.handle('item-7', itemContext(queryParams)));
    expect(error).toBeInstanceOf(ItemError);
    expect((error as ItemError).reason).toContain('user name or password');
    expect((error as ItemError).reason).not.toContain('hunter2');
    const [issue] = handler.checkQueryParams?.(queryParams) ?? [];
    expect(issue?.field).toBe('query_params.url');
    expect(issue?.message).not.toContain('hunter2');
    expect(requests).toHaveLength(0);
  });

  it('refuses a payload over 4 KiB of JSON, or one that is not an object', async () => {
    const handler = handlerFor();
    const big = { url: `${baseUrl}/status/200`, payload: { text: 'x'.repeat(5000) } };
    expect(handler.checkQueryParams?.(big)).toEqual([
      { field: 'query_params.payload', message: expect.stringContaining('at most 4096') },
    ]);
    const error = await rejection(handler.handle('item-7', itemContext(big)));
    expect((error as ItemError).reason).toContain('query_params.payload');
    expect(handler.checkQueryParams?.({ url: `${baseUrl}/`, payload: [1, 2] })?.[0]?.field).toBe(
      'query_params.payload',
    );
    expect(handler.checkQueryParams?.({ url: `${baseUrl}/`, payload: { ok: true } })).toEqual([]);
    expect(requests).toHaveLength(0);
  });

  it("judges each batch's query_params on their own: every item of a bad one fails, a good one sends", async () => {
    const handler = handlerFor();
    const bad = { url: 'ftp://127.0.0.1/file' };
    for (const item of ['a', 'b']) {
      const error = await rejection(handler.handle(item, itemContext(bad)));
      expect((error as ItemError).reason).toBe('query_params.url must be an http(s) URL');
    }
    await handler.handle('c', itemContext({ url: `${baseUrl}/status/200` }));
    const error = await rejection(handler.handle('d', itemContext({ url: `http://127.0.0.2:${port}/` })));
    expect((error as ItemError).reason).toBe('address not allowed');
    expect(requests).toHaveLength(1);
  });

  it('rejects a timeout that is not a positive number when created', () => {
    expect(() => createWebhookHandler({ signingSecrets: async () => [SECRET], timeoutMs: 0 })).toThrow(RangeError);
  });
});
