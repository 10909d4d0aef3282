/**
 * `opspad/client` against a real opspad (Postgres, Redis, workers): every call answers with the
 * documented shape, refusals are OpspadError with opspad's code, status and details, an
 * operation's events iterate until its end (and resume with Last-Event-ID after a dropped
 * stream), and the compiled client loads none of the server's modules.
 */
import { randomUUID } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, expectTypeOf, it } from 'vitest';
import type { z } from 'zod';
import type { TracesQuery as RouteTracesQuery } from '../../src/api/routes/executions.ts';
import type { Page } from '../../src/api/routes/scratchpad.ts';
import {
  createClient,
  type EventsPageQuery,
  type OperationStreamEvent,
  type OpspadClient,
  OpspadError,
  type TracesQuery,
  type VersionsQuery,
} from '../../src/client/index.ts';
import { type Harness, ids, startHarness, type Tenant } from '../helpers/harness.ts';

const DIST_CLIENT = fileURLToPath(new URL('../../dist/client/', import.meta.url));

/** A loopback server answering each request with `answer`; closed by the caller. */
async function loopback(
  answer: (req: import('node:http').IncomingMessage, res: import('node:http').ServerResponse) => void,
) {
  const server = createServer(answer);
  server.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

function close(server: Server): Promise<void> {
  server.closeAllConnections();
  return new Promise((resolve) => server.close(() => resolve()));
}

/** The error a call rejects with. */
async function refusal(call: Promise<unknown>): Promise<OpspadError> {
  const error = await call.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(OpspadError);
  return error as OpspadError;
}

describe('opspad/client (postgres)', () => {
  let harness: Harness;
  let tenant: Tenant;
  let client: OpspadClient;

  beforeAll(async () => {
    harness = await startHarness('postgres', { workers: true });
    tenant = await harness.newTenant();
    client = createClient({ baseUrl: harness.url, apiKey: tenant.apiKey });
  });
  afterAll(async () => {
    await harness?.close();
  });

  it('carries an assistant operation through every action, each answer typed', async () => {
    const conversation = randomUUID();
    const created = await client.operations.create(conversation, {
      operation_type: 'send_sms',
      total_items: 4,
      item_ids: ids(4),
      batch_size: 3,
      execution: 'assistant',
    });
    expectTypeOf(created.operation_id).toEqualTypeOf<string>();
    expect(created).toMatchObject({ status: 'active', total_items: 4, batch_size: 3, execution: 'assistant' });
    const id = created.operation_id;

    const first = await client.operations.progress(conversation);
    expect(first.batch).toEqual(['contact-1', 'contact-2', 'contact-3']);
    const updated = await client.operations.update(conversation, {
      operation_id: id,
      completed_ids: ['contact-1', 'contact-2'],
      failed: [{ id: 'contact-3', reason: 'no phone' }],
    });
    expect(updated).toMatchObject({ completed_count: 2, failed_count: 1, already_recorded: [], lease_conflicts: [] });

    const got = await client.operations.get(conversation, { operation_id: id });
    expect(got.failures).toEqual([{ id: 'contact-3', reason: 'no phone' }]);
    expect((await client.operations.pause(conversation, { operation_id: id })).status).toBe('paused');
    expect((await client.operations.resume(conversation, { operation_id: id })).status).toBe('active');

    const early = await refusal(client.operations.complete(conversation, { operation_id: id }));
    expect(early).toMatchObject({ code: 'items_remaining', status: 409 });
    expect(early.message).toMatch(/1 of 4 items not recorded/);

    const last = await client.operations.progress(conversation, { operation_id: id });
    expect(last.batch).toEqual(['contact-4']);
    await client.operations.update(conversation, { operation_id: id, completed_ids: ['contact-4'] });
    const completed = await client.operations.complete(conversation, { operation_id: id });
    expect(completed).toMatchObject({ status: 'completed', completed_count: 3, failed_count: 1, abandoned_count: 0 });
    expect(await client.operations.status(id)).toMatchObject({ status: 'completed', conversation_id: conversation });

    const retry = await client.operations.retryFailed(conversation, { operation_id: id });
    expect(retry).toMatchObject({ retry_of: id, total_items: 1, status: 'active' });
    const cancelled = await client.operations.cancel(conversation, { operation_id: retry.operation_id });
    expect(cancelled).toMatchObject({ status: 'cancelled', abandoned_count: 1 });
  });

  it('turns every refusal into an OpspadError with code, status and details', async () => {
    const conversation = randomUUID();
    const invalid = await refusal(
      client.operations.create(conversation, { operation_type: 'x', total_items: 3, item_ids: ['a', 'b'] }),
    );
    expect(invalid).toMatchObject({ name: 'OpspadError', code: 'validation_failed', status: 400 });
    expect(invalid.details.issues).toEqual([expect.objectContaining({ field: 'total_items' })]);

    const missing = await refusal(client.operations.status(randomUUID()));
    expect(missing).toMatchObject({ code: 'not_found', status: 404 });

    const stranger = createClient({ baseUrl: harness.url, apiKey: 'opk_not-a-key' });
    expect(await refusal(stranger.context.get(conversation))).toMatchObject({ code: 'unauthorized', status: 401 });

    // A path id is one segment, whatever it holds: never a way to another route.
    expect(await refusal(client.operations.status('../tools'))).toMatchObject({ status: 400 });
  });

  it('says network_error, timeout or invalid_response when opspad did not answer, and honours an abort', async () => {
    const refused = createClient({ baseUrl: 'http://127.0.0.1:9', apiKey: tenant.apiKey });
    expect(await refusal(refused.health.live())).toMatchObject({ code: 'network_error', status: 0 });

    const proxy = await loopback((_req, res) => {
      res.writeHead(502, { 'content-type': 'text/html' }).end('<h1>Bad gateway</h1>');
    });
    const silent = await loopback(() => {}); // never answers
    try {
      const behindProxy = createClient({ baseUrl: proxy.url, apiKey: tenant.apiKey });
      const html = await refusal(behindProxy.health.live());
      expect(html).toMatchObject({ code: 'invalid_response', status: 502 });
      expect(html.message).toContain('Bad gateway');

      const slow = createClient({ baseUrl: silent.url, apiKey: tenant.apiKey, timeoutMs: 200 });
      expect(await refusal(slow.health.live())).toMatchObject({ code: 'timeout', status: 0 });

      const controller = new AbortController();
      const reason = new Error('caller gave up');
      const pending = createClient({ baseUrl: silent.url, apiKey: tenant.apiKey }).health.live({
        signal: controller.signal,
      });
      controller.abort(reason);
      await expect(pending).rejects.toBe(reason);
    } finally {
      await close(proxy.server);
      await close(silent.server);
    }
  });

  it('iterates a background operation’s events until its end, and finished() resolves with the last progress', async () => {
    const conversation = randomUUID();
    const created = await client.operations.create(conversation, {
      operation_type: 'demo',
      total_items: 40,
      item_ids: ids(40, 'lead'),
      batch_size: 10,
      query_params: { failure_rate: 0.25 },
    });
    expect(created.execution).toBe('background');
    const seen: OperationStreamEvent[] = [];
    for await (const event of client.operations.events(created.operation_id)) {
      seen.push(event);
    }
    const end = seen.at(-1);
    expect(end?.event).toBe('end');
    if (end?.event !== 'end') {
      throw new Error('unreachable');
    }
    expect(end.data.completed_count + end.data.failed_count).toBe(40);
    expect(end.data.status).toBe('completed');
    const auditIds = seen.flatMap((e) => ('id' in e ? [e.id] : []));
    expect(auditIds.length).toBeGreaterThan(0);
    expect(auditIds).toEqual([...auditIds].sort((a, b) => a - b));
    expect(seen.some((e) => e.event === 'batch_recorded')).toBe(true);

    expect(await client.operations.finished(created.operation_id)).toEqual(end.data);
    // Another organization's operation: the stream is refused like any unknown id.
    const other = createClient({ baseUrl: harness.url, apiKey: (await harness.newTenant()).apiKey });
    expect(await refusal(other.operations.finished(created.operation_id))).toMatchObject({ code: 'not_found' });
  });

  it('opens a dropped stream again with Last-Event-ID, and gives up after maxReconnects empty attempts', async () => {
    const operationId = randomUUID();
    const progress = { operation_id: operationId, status: 'completed' };
    const lastEventIds: (string | undefined)[] = [];
    const flaky = await loopback((req, res) => {
      lastEventIds.push(req.headers['last-event-id'] as string | undefined);
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      if (lastEventIds.length === 1) {
        // The first stream drops after one audit event.
        res.end(`id: 41\nevent: batch_recorded\ndata: {"actor":"w","at":"2026-01-01T00:00:00.000Z"}\n\n`);
      } else {
        res.end(`event: end\ndata: ${JSON.stringify(progress)}\n\n`);
      }
    });
    const dead = await loopback((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' }).end(': nothing\n\n');
    });
    try {
      const events = [];
      for await (const event of createClient({ baseUrl: flaky.url, apiKey: 'k' }).operations.events(operationId, {
        reconnectDelayMs: 0,
      })) {
        events.push(event);
      }
      expect(events.map((e) => e.event)).toEqual(['batch_recorded', 'end']);
      expect(lastEventIds).toEqual([undefined, '41']);

      const gaveUp = await refusal(
        createClient({ baseUrl: dead.url, apiKey: 'k' }).operations.finished(operationId, {
          reconnectDelayMs: 0,
          maxReconnects: 2,
        }),
      );
      expect(gaveUp).toMatchObject({ code: 'network_error', details: { operation_id: operationId } });
    } finally {
      await close(flaky.server);
      await close(dead.server);
    }
  });

  it('serves the notes, executions, scratchpad, context, tools and health calls', async () => {
    const conversation = randomUUID();
    const execution = await client.executions.start(conversation);
    const written = await client.notes.write(
      conversation,
      { notes: 'plan: list indices', return_history: true },
      { executionId: execution.execution_id },
    );
    expect(written).toMatchObject({ scope: 'execution', execution_id: execution.execution_id, note_count: 1 });
    const read = await client.notes.read(conversation, {}, { executionId: execution.execution_id });
    expect(read.result).toContain('plan: list indices');
    expect((await client.executions.traces(execution.execution_id, { limit: 10 })).traces).toHaveLength(2);
    expect(await client.executions.end(execution.execution_id)).toMatchObject({ status: 'ended', cleared_notes: 1 });

    const updated = await client.scratchpad.update(conversation, {
      task: 'Follow up every lead',
      add: { open_items: [{ text: 'send SMS', source_ref: 'user:initial' }] },
    });
    expect(updated.version).toBe(1);
    const pad = await client.scratchpad.get(conversation);
    expect(pad.scratchpad.goals[0]?.text).toBe('Follow up every lead');
    const { version: _read, ...content } = pad.scratchpad;
    const put = await client.scratchpad.put(conversation, {
      expected_version: 1,
      scratchpad: { ...content, open_items: [] },
    });
    expect(put.scratchpad.version).toBe(2);
    const conflict = await refusal(
      client.scratchpad.put(conversation, { expected_version: 1, scratchpad: { goals: [] } }),
    );
    expect(conflict).toMatchObject({ code: 'version_conflict', status: 409 });
    expect((await client.scratchpad.versions(conversation, { limit: 1 })).versions).toHaveLength(1);
    expect((await client.scratchpad.settings(conversation, { reorganize_every: 0 })).settings.reorganize_every).toBe(0);
    expect((await client.scratchpad.reorganize(conversation)).status).toBe('reorganized');
    expect((await client.scratchpad.events(conversation)).events.length).toBeGreaterThan(0);

    const context = await client.context.get(conversation);
    expect(context.text).toContain('Follow up every lead');
    expect((await client.context.renders(conversation, { limit: 5 })).renders.length).toBeGreaterThan(0);

    const openai = await client.tools.list({ format: 'openai' });
    expect(openai.tools.length).toBe(4);
    const viaTool = await client.tools.call(conversation, 'manage_assistant_operation', {
      action: 'create',
      operation_type: 'from_a_model',
      total_items: 1,
      item_ids: ['a'],
    });
    expectTypeOf(viaTool).toHaveProperty('operation_id');
    expect(viaTool.status).toBe('active');
    expect(
      await refusal(client.tools.call(conversation, 'manage_assistant_operation', { action: 'nope' })),
    ).toMatchObject({ code: 'validation_failed' });

    expect(await client.health.live()).toEqual({ status: 'ok' });
    expect(await client.health.ready()).toMatchObject({ status: 'ready', checks: { postgres: 'ok', redis: 'ok' } });
  });
});

describe('opspad/client, compiled', () => {
  it('takes its query types from the routes’ schemas', () => {
    expectTypeOf<TracesQuery>().toEqualTypeOf<z.output<typeof RouteTracesQuery>>();
    expectTypeOf<VersionsQuery>().toEqualTypeOf<Partial<Pick<z.output<typeof Page>, 'before' | 'limit'>>>();
    expectTypeOf<EventsPageQuery>().toEqualTypeOf<Partial<Pick<z.output<typeof Page>, 'after' | 'limit'>>>();
  });

  /** Module specifiers of a compiled file (comments, which may hold examples, left out). */
  const specifiers = (file: string) =>
    [
      ...readFileSync(file, 'utf8')
        .replace(/\/\*[\s\S]*?\*\//g, '')
        .replace(/^\s*\/\/.*$/gm, '')
        .matchAll(/(?:from\s+|import\s*\(\s*|import\s+)['"]([^'"]+)['"]/g),
    ].map((m) => m[1] as string);

  /** The packages a TypeScript user of `entry` loads types from, following every import. */
  const typePackages = (entry: string): string[] => {
    const bare = new Set<string>();
    const seen = new Set<string>();
    const visit = (file: string) => {
      if (seen.has(file)) {
        return;
      }
      seen.add(file);
      for (const specifier of specifiers(file)) {
        if (specifier.startsWith('.')) {
          visit(resolve(dirname(file), specifier.replace(/\.(ts|js)$/, '.d.ts')));
        } else {
          bare.add(specifier);
        }
      }
    };
    visit(entry);
    return [...bare].sort();
  };

  it('imports nothing at run time but its own files', () => {
    const files = readdirSync(DIST_CLIENT);
    expect(files).toContain('index.js');
    for (const file of files.filter((f) => f.endsWith('.js'))) {
      for (const specifier of specifiers(join(DIST_CLIENT, file))) {
        expect(specifier, `${file} imports ${specifier}`).toMatch(/^\.\/[\w-]+\.js$/);
      }
    }
  });

  it('has types that reach zod only, and the package entry’s reach zod and pino only (no server library)', () => {
    expect(typePackages(join(DIST_CLIENT, 'index.d.ts'))).toEqual(['zod']);
    expect(typePackages(join(DIST_CLIENT, '..', 'index.d.ts'))).toEqual(['pino', 'zod']);
  });
});
