/**
 * What createOpspad (main.ts) takes and returns: the options of an embedded or CLI-started
 * opspad, and the running service with the parts a caller may use and its shutdown.
 */
import type { AdminCredentials } from './api/basic-auth.ts';
import type { ServiceConfig } from './api-server.ts';
import type { HandlerRegistry } from './handlers/registry.ts';
import type { Handler } from './handlers/types.ts';
import type { Logger } from './logger.ts';
import type { StartStep } from './main.ts';
import type { Metrics } from './metrics.ts';
import type { QueueBackend } from './queue/backend.ts';
import type { Dispatcher } from './queue/dispatcher.ts';
import type { Reconciler } from './queue/reconciler.ts';
import type { ReorganizeQueue } from './queue/reorganize-queue.ts';
import type { ReorganizeDeps } from './reorganizer/reorganize.ts';
import type { ShutdownStep } from './shutdown.ts';
import type { OpspadDatabase } from './store/index.ts';

export interface OpspadOptions {
  /** Every setting (loadConfig), or without the API's when `api` is false (an `opspad worker`). */
  config: ServiceConfig;
  logger: Logger;
  /** An already-open, migrated database (tests share one); otherwise opened from the config. */
  db?: OpspadDatabase;
  /**
   * The handlers of OPSPAD_HANDLERS, already loaded (the CLI loads them before it migrates, so a
   * module that fails to load is said at once); otherwise loaded here.
   */
  handlerModules?: readonly Handler[];
  /** Handlers passed in code, added to the built-ins and to those named in OPSPAD_HANDLERS. */
  handlers?: readonly Handler[];
  /** Serve the HTTP API (default true). */
  api?: boolean;
  /** Run workers and the reconciler (default true). */
  workers?: boolean;
  /** How often the events stream reads the database (default 1000 ms). */
  eventsPollMs?: number;
  /**
   * Called before each start step (see {@link START_STEPS}). For tests: throwing from it fails
   * that step, for steps that cannot be made to fail from outside.
   */
  beforeStartStep?: (step: StartStep) => void | Promise<void>;
  /**
   * The host application registered an OpenTelemetry SDK of its own: opspad's spans go to it and
   * BullMQ jobs carry the trace context, and OTEL_EXPORTER_OTLP_* are not used (default false).
   */
  externalTracing?: boolean;
}

export interface Opspad {
  /** Base URL of the HTTP API, when this process serves it. */
  url: string | undefined;
  /** Base URL of the metrics port (OPSPAD_METRICS_PORT), when it is set. */
  metricsUrl: string | undefined;
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
