/**
 * The composition root: builds every dependency from the configuration, starts the parts this
 * process runs (HTTP API, workers and reconciler), and tears them down in order on shutdown.
 * `createOpspad` is also how opspad is embedded as a library, with handlers passed in code.
 */
import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { authFailureLimiter } from './api/auth-failures.ts';
import type { AdminCredentials } from './api/basic-auth.ts';
import { listenMetrics } from './api/metrics-server.ts';
import { apiSettingsOf, closeServerGracefully, closeServerNow, listenApi, type ServiceConfig } from './api-server.ts';
import { loadSettings, METRICS_ACCESS_PARTS } from './config/env.ts';
import { retentionPolicy } from './config/retention.ts';
import { sizeLimitsOf } from './domain/size-limits.ts';
import { createEgressGuard } from './egress/index.ts';
import { createDemoHandler } from './handlers/demo.ts';
import { createHandlerRegistry, loadHandlerModules } from './handlers/registry.ts';
import type { Handler } from './handlers/types.ts';
import { createWebhookHandler } from './handlers/webhook.ts';
import { createMetrics } from './metrics.ts';
import type { Opspad, OpspadOptions } from './opspad-options.ts';
import { createDispatcher } from './queue/dispatcher.ts';
import { openQueueBackend } from './queue/open-queue-backend.ts';
import { type Reconciler, startReconciler } from './queue/reconciler.ts';
import { createReorganizeQueue, startReorganizeWorker } from './queue/reorganize-queue.ts';
import { withTelemetry } from './queue/traced-backend.ts';
import { startWorkerPool } from './queue/worker-pool.ts';
import type { ReorganizeDeps } from './reorganizer/reorganize.ts';
import { selectReorganizer } from './reorganizer/select.ts';
import { runShutdown, ShutdownTimeoutError } from './shutdown.ts';
import { StartFailedError, startSequence } from './start-steps.ts';
import type { ConversationScope, Queryable } from './store/index.ts';
import {
  keyLimitOverride,
  openConnectedDatabase,
  runMigrations,
  watchDatabase,
  webhookSigningSecrets,
} from './store/index.ts';
import { startTracing } from './telemetry/tracing.ts';

export type { ServiceConfig } from './api-server.ts';
export type { Opspad, OpspadOptions } from './opspad-options.ts';
export { StartFailedError };

/**
 * Shares of the shutdown bound: requests in flight get a fifth of it to finish before their
 * connections are closed, running batches half of it before they are aborted (they then record
 * what they finished and release the rest); the remainder is for that and for closing queues,
 * Redis and the database. With the default 15 s: 3 s and 7.5 s.
 */
const HTTP_DRAIN_SHARE = 0.2;
const BATCH_GRACE_SHARE = 0.5;

function baseUrlOf(host: string, port: number): string {
  return `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
}

/** `database` is called at work time only: handlers are registered before it is opened. */
function builtInHandlers(config: ServiceConfig, database: () => Queryable): Handler[] {
  return [
    createWebhookHandler({
      signingSecrets: (organizationId) => webhookSigningSecrets(database(), organizationId),
      guard: createEgressGuard({ allow: config.OPSPAD_WEBHOOK_ALLOW }),
      concurrency: config.OPSPAD_WEBHOOK_CONCURRENCY,
      itemConcurrency: config.OPSPAD_WEBHOOK_ITEM_CONCURRENCY,
    }),
    createDemoHandler({ concurrency: config.OPSPAD_DEMO_CONCURRENCY }),
  ];
}

/** The settings that are set: an embedding app's configuration may leave a part's out. */
function definedOf<T extends object>(config: T): Partial<T> {
  return Object.fromEntries(Object.entries(config).filter(([, value]) => value !== undefined)) as Partial<T>;
}

/**
 * The start steps of {@link createOpspad} in start order (a failure names one of them), each
 * with its place in the graceful shutdown, first stops first; null: it leaves nothing to stop.
 * What each step closes on a failed start and stops on shutdown is declared at the step. The
 * shutdown is not the reverse of start-up: the API stops taking requests before the workers
 * stop, and traces are flushed last, after everything that makes spans.
 */
const STEPS = {
  handlers: null,
  database: 8,
  migrations: null,
  'database watch': 0,
  tracing: 9,
  'queue backend': 7,
  queues: 6,
  'HTTP server': 1,
  'metrics server': 3,
  'reorganize worker': 4,
  'reorganize schedule': null,
  workers: 2,
  reconciler: 5,
} as const satisfies Record<string, number | null>;
export type StartStep = keyof typeof STEPS;
export const START_STEPS = Object.keys(STEPS) as StartStep[];

/**
 * Starts opspad in this process. A step that throws closes what the earlier ones opened, in
 * reverse order, and the promise rejects with a {@link StartFailedError} naming the step.
 */
export async function createOpspad(options: OpspadOptions): Promise<Opspad> {
  const { config, logger } = options;
  const runApi = options.api ?? true;
  const runWorkers = options.workers ?? true;
  const apiConfig = runApi ? apiSettingsOf(config) : undefined;
  const shutdownTimeoutMs = config.OPSPAD_SHUTDOWN_TIMEOUT;
  const start = startSequence<StartStep>({
    logger,
    timeoutMs: shutdownTimeoutMs,
    stopOrder: STEPS,
    beforeStep: options.beforeStartStep,
  });

  const handlers = await start.step('handlers', async () =>
    createHandlerRegistry([
      ...builtInHandlers(config, () => db),
      ...(options.handlerModules ?? (await loadHandlerModules(config.OPSPAD_HANDLERS))),
      ...(options.handlers ?? []),
    ]),
  );
  const db =
    options.db ??
    (await start.step('database', () => openConnectedDatabase(config), {
      shutdown: (opened) => ({ run: () => opened.close() }),
    }));
  if (!options.db) {
    await start.step('migrations', () => runMigrations(db));
  }
  // Says in the log and on /readyz when Postgres is gone (a crash, a failover) and when it is back.
  // A step of its own, so a start that fails later stops its probes before the pool closes.
  const databaseWatch = await start.step(
    'database watch',
    () => {
      const watch = watchDatabase(db, logger);
      if ('pool' in db) {
        db.pool.on('error', () => watch.probe());
      }
      return watch;
    },
    { shutdown: (watch) => ({ run: async () => watch.stop() }) },
  );
  // Before any queue exists: each one is created with BullMQ's telemetry hook when traces are on.
  const tracing = await start.step(
    'tracing',
    () => startTracing(config, logger, { external: options.externalTracing }),
    {
      shutdown: (started) => ({ run: () => started.shutdown() }),
    },
  );
  const queueBackend = withTelemetry(
    await start.step('queue backend', () => openQueueBackend(config, db), {
      shutdown: (backend) => ({ run: () => backend.close(), force: () => backend.force() }),
    }),
    tracing.bullmq,
  );
  const metrics = createMetrics();
  const { dispatcher, reorganizeQueue } = await start.step(
    'queues',
    () => ({
      dispatcher: createDispatcher({ backend: queueBackend, handlers, logger }),
      reorganizeQueue: createReorganizeQueue(
        queueBackend,
        { cron: config.OPSPAD_REORGANIZE_CRON, everyMs: config.OPSPAD_REORGANIZE_INTERVAL },
        logger,
      ),
    }),
    { shutdown: (opened) => ({ run: () => Promise.all([opened.dispatcher.close(), opened.reorganizeQueue.close()]) }) },
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
  // Without the operator surfaces or a metrics port (a worker process), nobody signs in with these.
  const adminPasswordGenerated = config.OPSPAD_ADMIN_PASSWORD === undefined;
  const admin: AdminCredentials = {
    user: config.OPSPAD_ADMIN_USER ?? 'admin',
    password: config.OPSPAD_ADMIN_PASSWORD ?? randomBytes(18).toString('base64url'),
  };

  let accepting = true;
  // Runs without the API too: its shutdown is where readiness starts failing.
  const server = await start.step(
    'HTTP server',
    () =>
      apiConfig &&
      listenApi({
        config: apiConfig,
        db,
        handlers,
        dispatcher,
        queueBackend,
        logger,
        metrics,
        queues,
        admin,
        reorganizeDeps,
        onReorganizeDue,
        eventsPollMs: options.eventsPollMs,
        accepting: () => accepting,
        databaseCheck: databaseWatch.check,
      }),
    {
      close: (listening) => async () => listening && closeServerNow(listening),
      shutdown: (listening) => ({
        async run() {
          accepting = false; // readiness fails and event streams end from now on
          if (listening) {
            await closeServerGracefully(listening, shutdownTimeoutMs * HTTP_DRAIN_SHARE);
          }
        },
        force: () => listening?.closeAllConnections(),
      }),
    },
  );
  let url: string | undefined;
  if (server && apiConfig) {
    url = baseUrlOf(apiConfig.HOST, (server.address() as AddressInfo).port);
    logger.info({ url, database: db.engine, queue: queueBackend.location }, 'opspad API listening');
  }

  const metricsPort = config.OPSPAD_METRICS_PORT;
  const metricsServer =
    metricsPort === undefined
      ? undefined
      : await start.step(
          'metrics server',
          async () => {
            // The sign-in settings, from the configuration or (embedded without them) their defaults.
            const access = { ...loadSettings(METRICS_ACCESS_PARTS, {}), ...definedOf(config) };
            return listenMetrics(
              {
                metrics,
                queues,
                admin,
                authFailures: authFailureLimiter(queueBackend.counter, access.OPSPAD_AUTH_FAILURE_LIMIT, logger),
                trustProxy: access.OPSPAD_TRUST_PROXY,
                logger,
                readiness: {
                  checks: { postgres: databaseWatch.check, ...queueBackend.readinessChecks },
                  accepting: () => accepting,
                },
              },
              metricsPort,
              config.OPSPAD_METRICS_HOST,
            );
          },
          {
            close: (listening) => () => closeServerNow(listening),
            // A scraper's keep-alive connection is idle between scrapes: closed at once.
            shutdown: (listening) => ({
              run: () => closeServerGracefully(listening),
              force: () => listening.closeAllConnections(),
            }),
          },
        );
  let metricsUrl: string | undefined;
  if (metricsServer) {
    metricsUrl = baseUrlOf(config.OPSPAD_METRICS_HOST, (metricsServer.address() as AddressInfo).port);
    logger.info({ url: `${metricsUrl}/metrics` }, 'metrics listening');
  }

  let reconciler: Reconciler | undefined;
  if (runWorkers) {
    await start.step(
      'reorganize worker',
      () =>
        startReorganizeWorker({
          backend: queueBackend,
          deps: reorganizeDeps,
          queue: reorganizeQueue,
          sweepBatch: config.OPSPAD_REORGANIZE_SWEEP_BATCH,
          logger,
        }),
      { shutdown: (worker) => ({ run: () => worker.close() }) },
    );
    await start.step('reorganize schedule', () => reorganizeQueue.ensureScheduler());
    await start.step(
      'workers',
      () =>
        startWorkerPool({
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
          laneSliceMs: config.OPSPAD_LANE_SLICE,
          keyLimitOverride: (organizationId, operationType, key) =>
            keyLimitOverride(db, organizationId, operationType, key),
        }),
      {
        close: (pool) => () => pool.close(0),
        shutdown: (pool) => ({ run: () => pool.close(shutdownTimeoutMs * BATCH_GRACE_SHARE) }),
      },
    );
    reconciler = await start.step(
      'reconciler',
      () =>
        startReconciler({
          db,
          dispatcher,
          handlers,
          logger,
          intervalMs: config.OPSPAD_RECONCILE_INTERVAL,
          pausedTtlMs: config.OPSPAD_PAUSED_TTL,
          queuePrefix: config.OPSPAD_QUEUE_PREFIX,
          // Schedulers live in the queue backend: a flushed Redis gets them back on the next pass.
          ensureSchedulers: () => reorganizeQueue.ensureScheduler(),
          retention: {
            policy: retentionPolicy(config),
            onPruned: (table, rows) => metrics.retentionRowsPruned.inc({ table }, rows),
          },
        }),
      { shutdown: (started) => ({ run: () => started.stop() }) },
    );
  }

  const shutdownSteps = start.shutdownSteps();

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
    metricsUrl,
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
