/**
 * The composition root: builds every dependency from the configuration, starts the parts this
 * process runs (HTTP API, workers and reconciler), and tears them down in order on shutdown.
 * `createOpspad` is also how opspad is embedded as a library, with handlers passed in code.
 */
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { AdminCredentials } from './api/basic-auth.ts';
import { createApp } from './api/create-app.ts';
import { rateLimitPerKey } from './api/rate-limit.ts';
import type { Config } from './config/env.ts';
import { createEgressGuard } from './egress/index.ts';
import { createDemoHandler } from './handlers/demo.ts';
import { createHandlerRegistry, type HandlerRegistry, loadHandlerModules } from './handlers/registry.ts';
import type { Handler } from './handlers/types.ts';
import { createWebhookHandler } from './handlers/webhook.ts';
import type { Logger } from './logger.ts';
import { createMetrics, type Metrics } from './metrics.ts';
import { assertRedisReachable, createRedisConnection } from './queue/connection.ts';
import { publishStop } from './queue/control-channel.ts';
import { createDispatcher, type Dispatcher } from './queue/dispatcher.ts';
import { type Reconciler, startReconciler } from './queue/reconciler.ts';
import { createReorganizeQueue, type ReorganizeQueue, startReorganizeWorker } from './queue/reorganize-queue.ts';
import { startWorkerPool, type WorkerPool } from './queue/worker-pool.ts';
import type { ReorganizeDeps } from './reorganizer/reorganize.ts';
import { selectReorganizer } from './reorganizer/select.ts';
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
  reorganizeQueue: ReorganizeQueue;
  /** What reorganizes pads (the configured model, or the built-in one). */
  reorganizeDeps: ReorganizeDeps;
  metrics: Metrics;
  /** Operator credentials for Bull Board and /metrics. */
  admin: AdminCredentials;
  /** True when the password was generated because OPSPAD_ADMIN_PASSWORD is unset. */
  adminPasswordGenerated: boolean;
  reconciler: Reconciler | undefined;
  /** Graceful: stop accepting requests, finish or release running batches, close connections. */
  close(): Promise<void>;
}

/** Hard limit on shutdown: a stuck connection must not keep the process alive forever. */
const SHUTDOWN_TIMEOUT_MS = 15_000;
/** How long running batches may take to finish at shutdown before they are aborted. */
const BATCH_GRACE_MS = 10_000;

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

  await assertRedisReachable(config.REDIS_URL);
  const handlers = createHandlerRegistry([
    ...builtInHandlers(config, () => db),
    ...(await loadHandlerModules(config.OPSPAD_HANDLERS)),
    ...(options.handlers ?? []),
  ]);
  const db = options.db ?? (await openDatabase(config));
  if (!options.db) {
    await runMigrations(db);
  }
  const metrics = createMetrics();
  const producer = createRedisConnection(config.REDIS_URL, 'producer');
  const dispatcher = createDispatcher({ connection: producer, prefix: config.OPSPAD_QUEUE_PREFIX, handlers, logger });
  const reorganizeQueue = createReorganizeQueue(
    producer,
    config.OPSPAD_QUEUE_PREFIX,
    {
      cron: config.OPSPAD_REORGANIZE_CRON,
      everyMs: config.OPSPAD_REORGANIZE_INTERVAL,
    },
    logger,
  );
  const reorganizeDeps: ReorganizeDeps = {
    db,
    reorganizer: selectReorganizer(config),
    reciteBudget: config.OPSPAD_RECITE_MAX_CHARS,
    logger,
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
      maxActiveBackground: config.OPSPAD_MAX_ACTIVE_BACKGROUND,
      queuePrefix: config.OPSPAD_QUEUE_PREFIX,
      hasHandler: (type) => handlers.has(type),
      checkQueryParams: (type, queryParams) => handlers.get(type)?.checkQueryParams?.(queryParams) ?? [],
      reciteBudget: config.OPSPAD_RECITE_MAX_CHARS,
      onReorganizeDue,
      async onActivated(operation) {
        // Postgres has the operation; if Redis refuses now, the reconciler dispatches it later.
        await dispatcher.startLanes(operation).catch((error: unknown) => {
          logger.warn({ err: error, operation_id: operation.id }, 'dispatch deferred to the reconciler');
        });
      },
      async onStopped(operation, reason) {
        if (operation.state_json.execution !== 'background') {
          return;
        }
        await publishStop(producer, config.OPSPAD_QUEUE_PREFIX, { operation_id: operation.id, reason }).catch(
          (error: unknown) => logger.warn({ err: error }, 'could not signal workers; they stop at their next batch'),
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
      rateLimit: rateLimitPerKey(producer, config.OPSPAD_QUEUE_PREFIX, config.OPSPAD_RATE_LIMIT, logger),
      admin,
      maxBodyBytes: config.OPSPAD_MAX_BODY_BYTES,
      eventsPollMs: options.eventsPollMs,
      readiness: {
        checks: {
          postgres: async () => void (await db.query('SELECT 1')),
          redis: async () => void (await producer.ping()),
        },
        accepting: () => accepting,
      },
    });
    server = app.listen(config.PORT, config.HOST);
    await once(server, 'listening');
    const { port } = server.address() as AddressInfo;
    url = `http://${config.HOST.includes(':') ? `[${config.HOST}]` : config.HOST}:${port}`;
    logger.info({ url, database: db.engine }, 'opspad API listening');
  }

  let workerPool: WorkerPool | undefined;
  let reconciler: Reconciler | undefined;
  let reorganizeWorker: ReturnType<typeof startReorganizeWorker> | undefined;
  const workerConnection = runWorkers ? createRedisConnection(config.REDIS_URL, 'worker') : undefined;
  if (runWorkers && workerConnection) {
    reorganizeWorker = startReorganizeWorker({
      connection: workerConnection,
      prefix: config.OPSPAD_QUEUE_PREFIX,
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
      redisUrl: config.REDIS_URL,
      prefix: config.OPSPAD_QUEUE_PREFIX,
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
      // Schedulers live in Redis: a flushed Redis gets them back on the next pass.
      ensureSchedulers: () => reorganizeQueue.ensureScheduler(),
    });
  }

  let closing: Promise<void> | undefined;
  const close = () => {
    closing ??= (async () => {
      accepting = false;
      const hardStop = setTimeout(() => server?.closeAllConnections(), SHUTDOWN_TIMEOUT_MS);
      const steps: [string, () => Promise<unknown>][] = [
        [
          'HTTP server',
          async () => {
            if (server) {
              const closed = new Promise<void>((resolve) => server?.close(() => resolve()));
              server.closeIdleConnections();
              await closed;
            }
          },
        ],
        ['workers', async () => workerPool?.close(BATCH_GRACE_MS)],
        ['reorganize worker', async () => reorganizeWorker?.close()],
        ['reconciler', async () => reconciler?.stop()],
        ['queues', async () => Promise.all([dispatcher.close(), reorganizeQueue.close()])],
        [
          'Redis',
          async () => {
            producer.disconnect();
            workerConnection?.disconnect();
          },
        ],
        ['database', () => (options.db ? Promise.resolve() : db.close())],
      ];
      for (const [name, step] of steps) {
        try {
          await step();
        } catch (error) {
          logger.error({ err: error }, `closing the ${name} failed`);
        }
      }
      clearTimeout(hardStop);
    })();
    return closing;
  };

  return {
    url,
    db,
    handlers,
    dispatcher,
    reorganizeQueue,
    reorganizeDeps,
    metrics,
    admin,
    adminPasswordGenerated,
    reconciler,
    close,
  };
}
