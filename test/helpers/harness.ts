/**
 * A running opspad on a loopback port over a real database, and tenants to call it with. The
 * Postgres harness uses the test file's database, shared by the file's tests (tenants keep them
 * apart, as they keep customers apart); the PGlite harness has an in-memory database of its own.
 */
import { randomUUID } from 'node:crypto';
import { inject } from 'vitest';
import { loadConfig, type QueueBackendKind } from '../../src/config/env.ts';
import type { Handler } from '../../src/handlers/types.ts';
import { createLogger } from '../../src/logger.ts';
import { createOpspad, type Opspad } from '../../src/main.ts';
import {
  createApiKey,
  createOperation,
  createPgliteDatabase,
  createPostgresDatabase,
  type Database,
  type OpspadDatabase,
  runMigrations,
} from '../../src/store/index.ts';
import { fileDatabaseUrl, fileQueuePrefix } from './file-database.ts';

export type Engine = 'postgres' | 'pglite';
export const ENGINES: readonly Engine[] = ['postgres', 'pglite'];
/** Where the jobs live: the suites of background work run on each. */
export const QUEUE_BACKENDS: readonly QueueBackendKind[] = ['redis', 'postgres'];

/** The environment that puts an opspad on `queue`: the run's Redis, or Postgres and no Redis at all. */
export function queueEnv(queue: QueueBackendKind): Record<string, string> {
  return queue === 'redis' ? { REDIS_URL: inject('redisUrl') } : { OPSPAD_QUEUE_BACKEND: 'postgres' };
}

export async function openTestDatabase(engine: Engine, databaseUrl?: string): Promise<OpspadDatabase> {
  if (engine === 'postgres') {
    return createPostgresDatabase({ connectionString: databaseUrl ?? fileDatabaseUrl(), poolSize: 8 });
  }
  const db = await createPgliteDatabase();
  await runMigrations(db);
  return db;
}

export interface HttpResult<T = Record<string, unknown>> {
  status: number;
  body: T;
}

export interface Tenant {
  organizationId: string;
  apiKey: string;
  /** Calls a tool in `conversationId` with `input` as the JSON body (and extra request headers). */
  tool<T = Record<string, unknown>>(
    conversationId: string,
    input: unknown,
    toolName?: string,
    extraHeaders?: Record<string, string>,
  ): Promise<HttpResult<T>>;
  op<T = Record<string, unknown>>(conversationId: string, input: unknown): Promise<HttpResult<T>>;
  context(conversationId: string): Promise<HttpResult<{ text: string; operations: Record<string, unknown>[] }>>;
  get<T = Record<string, unknown>>(path: string): Promise<HttpResult<T>>;
  /** POSTs `body` (none when undefined) as JSON to `path`. */
  post<T = Record<string, unknown>>(path: string, body?: unknown): Promise<HttpResult<T>>;
}

export interface Harness {
  url: string;
  /** Its OPSPAD_QUEUE_PREFIX (a worker harness given the same one shares its queues). */
  prefix: string;
  db: OpspadDatabase;
  service: Opspad;
  /** Basic-auth header value for the operator pages. */
  adminAuthorization: string;
  newTenant(): Promise<Tenant>;
  request<T = Record<string, unknown>>(path: string, init?: RequestInit): Promise<HttpResult<T>>;
  close(): Promise<void>;
}

export interface HarnessOptions {
  env?: Record<string, string>;
  /** Run workers and the reconciler in the harness process (default false). */
  workers?: boolean;
  handlers?: readonly Handler[];
  eventsPollMs?: number;
  /** Postgres only: a (migrated) database other than the run's. */
  databaseUrl?: string;
  /** Where the jobs live (default redis). */
  queue?: QueueBackendKind;
}

/** A BullMQ prefix of its own for each harness, under the run's prefix (removed at the end). */
export function harnessPrefix(): string {
  return `${fileQueuePrefix()}-${randomUUID().slice(0, 8)}`;
}

export async function startHarness(engine: Engine, options: HarnessOptions = {}): Promise<Harness> {
  const db = await openTestDatabase(engine, options.databaseUrl);
  const config = loadConfig({
    PORT: '0',
    HOST: '127.0.0.1',
    OPSPAD_LOG_LEVEL: 'silent',
    ...queueEnv(options.queue ?? 'redis'),
    // The database the harness opened: the Postgres queue backend runs on the same server.
    ...(engine === 'postgres' ? { DATABASE_URL: options.databaseUrl ?? fileDatabaseUrl() } : {}),
    OPSPAD_QUEUE_PREFIX: harnessPrefix(),
    OPSPAD_ADMIN_PASSWORD: 'test-admin-password',
    // The scheduled sweep reorganizes every organization's changed pads; a file's tests share
    // its database, so it stays out of the way unless a test runs it (sweepPads) itself.
    OPSPAD_REORGANIZE_INTERVAL: '24h',
    ...options.env,
  });
  const service = await createOpspad({
    config,
    logger: createLogger(config.OPSPAD_LOG_LEVEL),
    db,
    workers: options.workers ?? false,
    handlers: options.handlers,
    eventsPollMs: options.eventsPollMs ?? 50,
  });
  // The reconciler's first pass runs as it starts: a test's own pass (runOnce) then reports
  // only what the test set up, not what the first pass happened to find first.
  await service.reconciler?.idle();
  const baseUrl = service.url as string;
  const request = async <T>(path: string, init: RequestInit = {}): Promise<HttpResult<T>> => {
    const response = await fetch(`${baseUrl}${path}`, init);
    const text = await response.text();
    return { status: response.status, body: (text ? JSON.parse(text) : {}) as T };
  };
  return {
    url: baseUrl,
    prefix: config.OPSPAD_QUEUE_PREFIX,
    db,
    service,
    adminAuthorization: `Basic ${Buffer.from(`admin:${config.OPSPAD_ADMIN_PASSWORD}`).toString('base64')}`,
    request,
    async newTenant() {
      const created = await createApiKey(db, `org-${randomUUID()}`);
      const headers = { authorization: `Bearer ${created.api_key}`, 'content-type': 'application/json' };
      const tool = <T>(
        conversationId: string,
        input: unknown,
        toolName = 'manage_assistant_operation',
        extraHeaders: Record<string, string> = {},
      ) =>
        request<T>(`/v1/conversations/${conversationId}/tools/${toolName}`, {
          method: 'POST',
          headers: { ...headers, ...extraHeaders },
          body: JSON.stringify(input),
        });
      return {
        organizationId: created.organization_id,
        apiKey: created.api_key,
        tool,
        op: (conversationId, input) => tool(conversationId, input),
        context: (conversationId) => request(`/v1/conversations/${conversationId}/context`, { headers }),
        get: (path) => request(path, { headers }),
        post: (path, body) =>
          request(path, { method: 'POST', headers, body: body === undefined ? undefined : JSON.stringify(body) }),
      };
    },
    async close() {
      await service.close();
      await db.close();
    },
  };
}

export function ids(count: number, prefix = 'contact'): string[] {
  return Array.from({ length: count }, (_, i) => `${prefix}-${i + 1}`);
}

/**
 * A new organization and an assistant operation of `items` ids (`ids(items)`) in a new
 * conversation of it, created through the store: for tests of the store's own statements.
 */
export async function newStoreOperation(
  db: OpspadDatabase,
  items: number,
  batchSize: number,
  extra: { maxFailureRate?: number } = {},
): Promise<{ scope: { organizationId: string; conversationId: string }; operationId: string }> {
  const { organization_id } = await createApiKey(db, `org-${randomUUID()}`);
  const scope = { organizationId: organization_id, conversationId: randomUUID() };
  const { operation } = await createOperation(db, scope, {
    operationType: 'send_sms',
    itemIds: ids(items),
    batchSize,
    queryParams: null,
    notes: null,
    execution: 'assistant',
    actor: 'test',
    ...extra,
  });
  return { scope, operationId: operation.id };
}

/**
 * `db`, counting the statements sent (a transaction's BEGIN and COMMIT count as two); `sent` is
 * the text of each statement sent through it, in order (BEGIN and COMMIT are not among them).
 */
export function counting(db: Database): { db: Database; statements: () => number; sent: () => readonly string[] } {
  let n = 0;
  const texts: string[] = [];
  const counted: Database = {
    engine: db.engine,
    query: (text, params) => {
      n++;
      texts.push(text);
      return db.query(text, params);
    },
    transaction: (fn) =>
      db.transaction((tx) => {
        n += 2;
        return fn({
          ...tx,
          copyIn: tx.copyIn,
          query: (text, params) => {
            n++;
            texts.push(text);
            return tx.query(text, params);
          },
        });
      }),
    withTryLock: (key, fn) => db.withTryLock(key, fn),
    close: () => db.close(),
  };
  return { db: counted, statements: () => n, sent: () => texts };
}
