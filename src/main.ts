/**
 * The composition root: builds every dependency from the configuration, starts the parts this
 * process runs (HTTP API, workers and reconciler), and tears them down in order on shutdown.
 * `createOpspad` is also how opspad is embedded as a library, with handlers passed in code.
 */
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { authFailureLimiter } from './api/auth-failures.ts';
import type { AdminCredentials } from './api/basic-auth.ts';
import { createApp } from './api/create-app.ts';
import { rateLimitPerKey } from './api/rate-limit.ts';
import { streamSlots } from './api/stream-slots.ts';
import type { Config } from './config/env.ts';
import { sizeLimitsOf } from './domain/size-limits.ts';
import { createEgressGuard } from './egress/index.ts';
import { createDemoHandler } from './handlers/demo.ts';
import { createHandlerRegistry, type HandlerRegistry, loadHandlerModules } from './handlers/registry.ts';
import type { Handler } from './handlers/types.ts';
import { createWebhookHandler } from './handlers/webhook.ts';
import type { Logger } from './logger.ts';
import { createMetrics, type Metrics } from './metrics.ts';
import type { QueueBackend } from './queue/backend.ts';
import { createDispatcher, type Dispatcher } from './queue/dispatcher.ts';
import { openQueueBackend } from './queue/open-queue-backend.ts';
import { type Reconciler, startReconciler } from './queue/reconciler.ts';
import { createReorganizeQueue, type ReorganizeQueue, startReorganizeWorker } from './queue/reorganize-queue.ts';
import { startWorkerPool, type WorkerPool } from './queue/worker-pool.ts';
import type { ReorganizeDeps } from './reorganizer/reorganize.ts';
import { selectReorganizer } from './reorganizer/select.ts';
import { runShutdown, type ShutdownStep, ShutdownTimeoutError } from './shutdown.ts';
import type { ConversationScope, Queryable } from './store/index.ts';
import { type OpspadDatabase, openDatabase, runMigrations, webhookSigningSecrets } from './store/index.ts';
import { createToolRegistry } from './tools/registry.ts';

export interface OpspadOptions {
  config: Config;
  logger: Logger;
  /** An already-open, migrated database (tests share one); otherwise opened from the config. */
  db?: OpspadDatabase;
  /** Handlers passed in code, added to the built-ins and to those named in OPSPAD_HANDLERS. */
  handlers?: readonly Handler[];
  /** Serve the HTTP API (default true). */
  api?: boolean;
  /** Run workers and the reconciler (default true). */
  workers?: boolean;
  /** How often the events stream reads the database (default 1000 ms). */
  eventsPollMs?: number;
}

export interface Opspad {
  /** Base URL of the HTTP API, when this process serves it. */
  url: string | undefined;
  db: OpspadDatabase;
  handlers: HandlerRegistry;
  dispatcher: Dispatcher;
  /** Where the jobs live (Redis or Postgres), with the control channel and request counter. */
  queueBackend: QueueBackend;
  reorganizeQueue: ReorganizeQueue;
  /** What reorganizes pads (the configured model, or the built-in one). */
  reorganizeDeps: ReorganizeDeps;
  metrics: Metrics;
  /** Operator credentials for Bull Board and /metrics. */
  admin: AdminCredentials;
  /** True when the password was generated because OPSPAD_ADMIN_PASSWORD is unset. */
  adminPasswordGenerated: boolean;
  reconciler: Reconciler | undefined;
  /** What {@link close} runs, in order; for a caller that adds steps of its own under one bound. */
  shutdownSteps: readonly ShutdownStep[];
  /**
   * Graceful: stop accepting requests, finish or release running batches, close connections,
   * all within OPSPAD_SHUTDOWN_TIMEOUT; past it, rejects with a {@link ShutdownTimeoutError}
   * naming the step it gave up on, after dropping the connections it could.
   */
  close(): Promise<void>;
}

/**
 * Shares of the shutdown bound: requests in flight get a fifth of it to finish before their
 * connections are closed, running batches half of it before they are aborted (they then record
 * what they finished and release the rest); the remainder is for that and for closing queues,
 * Redis and the database. With the default 15 s: 3 s and 7.5 s.
 */
const HTTP_DRAIN_SHARE = 0.2;
const BATCH_GRACE_SHARE = 0.5;

/** `database` is called at work time only: handlers are registered before it is opened. */
function builtInHandlers(config: Config, database: () => Queryable): Handler[] {
  return [
    createWebhookHandler({
      signingSecrets: (organizationId) => webhookSigningSecrets(database(), organizationId),
      guard: createEgressGuard({ allow: config.OPSPAD_WEBHOOK_ALLOW }),
    }),
    createDemoHandler(),
  ];
}

export async function createOpspad(options: OpspadOptions): Promise<Opspad> {
  const { config, logger } = options;
  const runApi = options.api ?? true;
  const runWorkers = options.workers ?? true;

  const handlers = createHandlerRegistry([
    ...builtInHandlers(config, () => db),
    ...(await loadHandlerModules(config.OPSPAD_HANDLERS)),
    ...(options.handlers ?? []),
  ]);
  const db = options.db ?? (await openDatabase(config));
  if (!options.db) {
    await runMigrations(db);
  }
  const queueBackend = await openQueueBackend(config, db).catch(async (error: unknown) => {
    if (!options.db) {
      await db.close();
    }
    throw error;
  });
  const metrics = createMetrics();
  const dispatcher = createDispatcher({ backend: queueBackend, handlers, logger });
  const reorganizeQueue = createReorganizeQueue(
    queueBackend,
    {
      cron: config.OPSPAD_REORGANIZE_CRON,
      everyMs: config.OPSPAD_REORGANIZE_INTERVAL,
    },
    logger,
  );
  const sizeLimits = sizeLimitsOf(config);
  const reorganizeDeps: ReorganizeDeps = {
    db,
    reorganizer: selectReorganizer(config),
    reciteBudget: config.OPSPAD_RECITE_MAX_CHARS,
    logger,
    sizeLimits,
  };
  const onReorganizeDue = async (scope: ConversationScope, version: number) => {
    // The sweep catches any pad whose job could not be added now.
    await reorganizeQueue.enqueue(scope, version, 'cadence').catch((error: unknown) => {
      logger.warn({ err: error, conversation_id: scope.conversationId }, 'reorganization deferred to the sweep');
    });
  };
  const queues = [...dispatcher.queues, reorganizeQueue.queue];
  const adminPasswordGenerated = config.OPSPAD_ADMIN_PASSWORD === undefined;
  const admin = {
    user: config.OPSPAD_ADMIN_USER,
    password: config.OPSPAD_ADMIN_PASSWORD ?? randomBytes(18).toString('base64url'),
  };

  let server: Server | undefined;
  let url: string | undefined;
  let accepting = true;
  if (runApi) {
    const tools = createToolRegistry({
      db,
      maxItems: config.OPSPAD_MAX_ITEMS,
      sizeLimits,
      maxActiveBackground: config.OPSPAD_MAX_ACTIVE_BACKGROUND,
      queuePrefix: config.OPSPAD_QUEUE_PREFIX,
      hasHandler: (type) => handlers.has(type),
      checkQueryParams: (type, queryParams) => handlers.get(type)?.checkQueryParams?.(queryParams) ?? [],
      reciteBudget: config.OPSPAD_RECITE_MAX_CHARS,
      onReorganizeDue,
      async onActivated(operation) {
        // Postgres has the operation; if the queue refuses now, the reconciler dispatches it later.
        await dispatcher.startLanes(operation).catch((error: unknown) => {
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
    const app = createApp({
      db,
      tools,
      logger,
      metrics,
      queues,
      scratchpad: { ...reorganizeDeps, onReorganizeDue },
      contextMaxTokens: config.OPSPAD_CONTEXT_MAX_TOKENS,
      rateLimit: rateLimitPerKey(queueBackend.counter, config.OPSPAD_RATE_LIMIT, logger),
      authFailures: authFailureLimiter(queueBackend.counter, config.OPSPAD_AUTH_FAILURE_LIMIT, logger),
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
      admin,
      maxBodyBytes: config.OPSPAD_MAX_BODY_BYTES,
      eventsPollMs: options.eventsPollMs,
      readiness: {
        checks: {
          postgres: async () => void (await db.query('SELECT 1')),
          ...queueBackend.readinessChecks,
        },
        accepting: () => accepting,
      },
    });
    server = app.listen(config.PORT, config.HOST);
    await once(server, 'listening');
    const { port } = server.address() as AddressInfo;
    url = `http://${config.HOST.includes(':') ? `[${config.HOST}]` : config.HOST}:${port}`;
    logger.info({ url, database: db.engine, queue: queueBackend.location }, 'opspad API listening');
  }

  let workerPool: WorkerPool | undefined;
  let reconciler: Reconciler | undefined;
  let reorganizeWorker: ReturnType<typeof startReorganizeWorker> | undefined;
  if (runWorkers) {
    reorganizeWorker = startReorganizeWorker({
      backend: queueBackend,
      deps: reorganizeDeps,
      queue: reorganizeQueue,
      sweepBatch: config.OPSPAD_REORGANIZE_SWEEP_BATCH,
      logger,
    });
    await reorganizeQueue.ensureScheduler();
    workerPool = await startWorkerPool({
      db,
      handlers,
      dispatcher,
      logger,
      metrics,
      backend: queueBackend,
      queuePrefix: config.OPSPAD_QUEUE_PREFIX,
      leaseTtlMs: config.OPSPAD_LEASE_TTL,
      jobLockTtlMs: config.OPSPAD_JOB_LOCK_TTL,
      batchTimeoutMs: config.OPSPAD_BATCH_TIMEOUT,
      batchGraceMs: config.OPSPAD_BATCH_GRACE,
    });
    reconciler = startReconciler({
      db,
      dispatcher,
      handlers,
      logger,
      intervalMs: config.OPSPAD_RECONCILE_INTERVAL,
      pausedTtlMs: config.OPSPAD_PAUSED_TTL,
      queuePrefix: config.OPSPAD_QUEUE_PREFIX,
      // Schedulers live in the queue backend: a flushed Redis gets them back on the next pass.
      ensureSchedulers: () => reorganizeQueue.ensureScheduler(),
    });
  }

  const shutdownTimeoutMs = config.OPSPAD_SHUTDOWN_TIMEOUT;
  const shutdownSteps: ShutdownStep[] = [
    {
      name: 'HTTP server',
      async run() {
        accepting = false; // readiness fails and event streams end from now on
        if (server) {
          const open = server;
          const closed = new Promise<void>((resolve) => open.close(() => resolve()));
          open.closeIdleConnections();
          const drain = setTimeout(() => open.closeAllConnections(), shutdownTimeoutMs * HTTP_DRAIN_SHARE);
          await closed;
          clearTimeout(drain);
        }
      },
      force: () => server?.closeAllConnections(),
    },
    { name: 'workers', run: async () => workerPool?.close(shutdownTimeoutMs * BATCH_GRACE_SHARE) },
    { name: 'reorganize worker', run: async () => reorganizeWorker?.close() },
    { name: 'reconciler', run: async () => reconciler?.stop() },
    { name: 'queues', run: async () => Promise.all([dispatcher.close(), reorganizeQueue.close()]) },
    { name: 'queue backend', run: () => queueBackend.close(), force: () => queueBackend.force() },
    { name: 'database', run: () => (options.db ? Promise.resolve() : db.close()) },
  ];

  let closing: Promise<void> | undefined;
  const close = () => {
    closing ??= (async () => {
      const report = await runShutdown(shutdownSteps, { timeoutMs: shutdownTimeoutMs, logger });
      if (report.stuck) {
        throw new ShutdownTimeoutError(report.stuck, shutdownTimeoutMs);
      }
    })();
    return closing;
  };

  return {
    url,
    db,
    handlers,
    dispatcher,
    queueBackend,
    reorganizeQueue,
    reorganizeDeps,
    metrics,
    admin,
    adminPasswordGenerated,
    reconciler,
    shutdownSteps,
    close,
  };
}
