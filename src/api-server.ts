/**
 * The HTTP API of a running opspad: the tool registry and the express app wired to the rest of
 * the service, and the listening socket. Built by `createOpspad` (src/main.ts) as its
 * `HTTP server` start step.
 */
import { once } from 'node:events';
import type { Server } from 'node:http';
import { authFailureLimiter } from './api/auth-failures.ts';
import type { AdminCredentials } from './api/basic-auth.ts';
import { createApp } from './api/create-app.ts';
import { rateLimitPerAddress, rateLimitPerKey } from './api/rate-limit.ts';
import { streamSlots } from './api/stream-slots.ts';
import type { ApiSettings, SERVICE_PARTS, Settings } from './config/env.ts';
import { sizeLimitsOf } from './domain/size-limits.ts';
import type { HandlerRegistry } from './handlers/registry.ts';
import type { Logger } from './logger.ts';
import type { Metrics } from './metrics.ts';
import type { QueueBackend } from './queue/backend.ts';
import type { Dispatcher } from './queue/dispatcher.ts';
import type { ReorganizeDeps } from './reorganizer/reorganize.ts';
import type { ConversationScope, OpspadDatabase } from './store/index.ts';
import { ATTR, inSpan } from './telemetry/spans.ts';
import { bulkActionRunner } from './tools/bulk-action-runner.ts';
import { createToolRegistry } from './tools/registry.ts';

/** What a process running opspad reads, whether or not it serves the API. */
export type ServiceSettings = Settings<(typeof SERVICE_PARTS)[number]>;
/** A service's settings; those of the API (address, limits of requests, operator surfaces) when it serves it. */
export type ServiceConfig = ServiceSettings & Partial<ApiSettings>;

/** Settings every serving process has, each with a default: present once the API's parts are read. */
const API_MARKERS = ['PORT', 'HOST', 'OPSPAD_RATE_LIMIT', 'OPSPAD_ADMIN_USER'] as const;

/** The API's settings, or a clear error when the caller did not read them (a programming error). */
export function apiSettingsOf(config: ServiceConfig): ServiceSettings & ApiSettings {
  const missing = API_MARKERS.filter((name) => config[name] === undefined);
  if (missing.length > 0) {
    throw new TypeError(
      `Serving the HTTP API needs its settings (${missing.join(', ')} missing): pass a configuration from loadConfig(), or api: false.`,
    );
  }
  return config as ServiceSettings & ApiSettings;
}

export interface ApiServerDeps {
  config: ServiceSettings & ApiSettings;
  db: OpspadDatabase;
  handlers: HandlerRegistry;
  dispatcher: Dispatcher;
  queueBackend: QueueBackend;
  logger: Logger;
  metrics: Metrics;
  queues: Parameters<typeof createApp>[0]['queues'];
  admin: AdminCredentials;
  reorganizeDeps: ReorganizeDeps;
  onReorganizeDue(scope: ConversationScope, version: number): Promise<void>;
  eventsPollMs: number | undefined;
  /** False once shutdown began: readiness fails and event streams end. */
  accepting(): boolean;
  /** Readiness of the database: throws a message naming the outage when it is gone. */
  databaseCheck(): Promise<void>;
}

/** Builds the app and listens on HOST:PORT; rejects when the address cannot be bound. */
export async function listenApi(deps: ApiServerDeps): Promise<Server> {
  const { config, db, handlers, dispatcher, queueBackend, logger } = deps;
  const tools = createToolRegistry({
    db,
    maxItems: config.OPSPAD_MAX_ITEMS,
    sizeLimits: sizeLimitsOf(config),
    notesBounds: { maxNotes: config.OPSPAD_MAX_NOTES_PER_SCOPE, readBytes: config.OPSPAD_MAX_READ_BYTES },
    maxActiveBackground: config.OPSPAD_MAX_ACTIVE_BACKGROUND,
    quota: { maxStoredItems: config.OPSPAD_MAX_STORED_ITEMS, maxOpenOperations: config.OPSPAD_MAX_OPEN_OPERATIONS },
    queuePrefix: config.OPSPAD_QUEUE_PREFIX,
    hasHandler: (type) => handlers.has(type),
    checkQueryParams: (type, queryParams) => handlers.get(type)?.checkQueryParams?.(queryParams) ?? [],
    reciteBudget: config.OPSPAD_RECITE_MAX_CHARS,
    onReorganizeDue: deps.onReorganizeDue,
    async onActivated(operation) {
      // Awaiting approval: dispatched when a person approves it (tools/approvals.ts).
      if (operation.status !== 'active') {
        return;
      }
      // Postgres has the operation; if the queue refuses now, the reconciler dispatches it later.
      await inSpan(
        'dispatch operation',
        {
          attributes: {
            [ATTR.organizationId]: operation.organization_id,
            [ATTR.operationId]: operation.id,
            [ATTR.operationType]: operation.operation_type,
          },
        },
        async (span) => span.setAttribute(ATTR.lanes, await dispatcher.startLanes(operation)),
      ).catch((error: unknown) => {
        logger.warn({ err: error, operation_id: operation.id }, 'dispatch deferred to the reconciler');
      });
    },
    async onStopped(operation, reason) {
      if (operation.state_json.execution !== 'background') {
        return;
      }
      await queueBackend.control
        .publish({ operation_id: operation.id, reason })
        .catch((error: unknown) =>
          logger.warn({ err: error }, 'could not signal workers; they stop at their next batch'),
        );
    },
  });
  // Operator bulk actions run here, after their POST answered; actions a stopped server left are
  // finished by the sweep (at start, then every 30 s).
  const bulkActions = bulkActionRunner({ db, tools, logger });
  const app = createApp({
    db,
    tools,
    logger,
    bulkActions,
    maxBulkOperations: config.OPSPAD_MAX_BULK_OPERATIONS,
    metrics: deps.metrics,
    queues: deps.queues,
    registeredWorkers: queueBackend.registeredWorkers,
    scratchpad: { ...deps.reorganizeDeps, onReorganizeDue: deps.onReorganizeDue },
    contextMaxTokens: config.OPSPAD_CONTEXT_MAX_TOKENS,
    mcp: {
      publicUrl: config.OPSPAD_PUBLIC_URL,
      host: config.HOST,
      allowedOrigins: config.OPSPAD_MCP_ALLOWED_ORIGINS,
      sessions: { maxSessions: config.OPSPAD_MCP_MAX_SESSIONS, idleMs: config.OPSPAD_MCP_SESSION_IDLE },
      oauth: config.OPSPAD_OAUTH
        ? {
            tokenTtlMs: config.OPSPAD_OAUTH_TOKEN_TTL,
            refreshTtlMs: config.OPSPAD_OAUTH_REFRESH_TTL,
            registrationLimit: rateLimitPerAddress(
              queueBackend.counter,
              config.OPSPAD_OAUTH_REGISTRATION_LIMIT,
              logger,
              {
                name: 'oauth-registration',
                variable: 'OPSPAD_OAUTH_REGISTRATION_LIMIT',
              },
            ),
          }
        : undefined,
    },
    rateLimit: rateLimitPerKey(queueBackend.counter, config.OPSPAD_RATE_LIMIT, logger),
    authFailures: authFailureLimiter(queueBackend.counter, config.OPSPAD_AUTH_FAILURE_LIMIT, logger),
    apiKeyCacheTtlMs: config.OPSPAD_API_KEY_CACHE_TTL,
    trustProxy: config.OPSPAD_TRUST_PROXY,
    adminReadOnly: config.OPSPAD_ADMIN_READONLY,
    streams: {
      heartbeatMs: config.OPSPAD_STREAM_HEARTBEAT,
      idleMs: config.OPSPAD_STREAM_IDLE_TIMEOUT,
      keyCheckMs: config.OPSPAD_STREAM_KEY_CHECK,
      // A stream renews its slot at every key check: three missed renewals and it lapses.
      slots: streamSlots(
        queueBackend.leases,
        {
          maxPerKey: config.OPSPAD_MAX_STREAMS_PER_KEY,
          leaseMs: Math.max(30_000, 3 * config.OPSPAD_STREAM_KEY_CHECK),
        },
        logger,
      ),
    },
    admin: deps.admin,
    maxBodyBytes: config.OPSPAD_MAX_BODY_BYTES,
    maxRunningExecutions: config.OPSPAD_MAX_RUNNING_EXECUTIONS,
    quota: { maxStoredItems: config.OPSPAD_MAX_STORED_ITEMS, maxOpenOperations: config.OPSPAD_MAX_OPEN_OPERATIONS },
    eventsPollMs: deps.eventsPollMs,
    readiness: {
      checks: {
        postgres: deps.databaseCheck,
        ...queueBackend.readinessChecks,
      },
      accepting: deps.accepting,
    },
  });
  const server = app.listen(config.PORT, config.HOST);
  // 'error' (the port is taken, the address is not this machine's) rejects.
  await once(server, 'listening');
  bulkActions.start();
  server.once('close', () => void bulkActions.stop());
  return server;
}

/** Closes a server at once, dropping any connection (start-up failed after it listened). */
export function closeServerNow(server: Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
}

/**
 * Closes a server once its requests are done: idle keep-alive connections (a client's, a
 * scraper's) are closed now, busy ones when their response ends, and any still open after
 * `dropAfterMs` are dropped.
 */
export async function closeServerGracefully(server: Server, dropAfterMs?: number): Promise<void> {
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  server.closeIdleConnections();
  const drop = dropAfterMs === undefined ? undefined : setTimeout(() => server.closeAllConnections(), dropAfterMs);
  await closed;
  clearTimeout(drop);
}
