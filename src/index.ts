/**
 * The `opspad` package: embed opspad in an app (`createOpspad`), write handlers for its workers
 * (`defineHandler`, `ItemError`, `RetryableError` and the handler types), and describe its HTTP
 * API (`openApiDocument`). The typed HTTP client is `opspad/client`; `opspad/ai-sdk` and
 * `opspad/openai-agents` give its tools and working memory to those agent frameworks.
 *
 * What is exported here is the public contract; everything else under dist/ is internal and may
 * change in any release.
 */
import { API_PARTS, ConfigError, loadSettings, SERVICE_PARTS } from './config/env.ts';
import type { Handler } from './handlers/types.ts';
import { createLogger, type Logger } from './logger.ts';
import { createOpspad as createService } from './main.ts';
import { StartFailedError } from './start-steps.ts';
import { createApiKey } from './store/index.ts';

export { openApiDocument } from './api/openapi/document.ts';
export type { LimitKeySource } from './domain/key-limits.ts';
export type {
  BatchContext,
  BatchHandler,
  Handler,
  HandlerContext,
  HandlerLimits,
  HandlerSettings,
  ItemContext,
  ItemHandler,
  ItemOutcome,
  QueryParamsIssue,
} from './handlers/types.ts';
export { defineHandler, ItemError, RetryableError } from './handlers/types.ts';
export type { Logger };
export { ConfigError, StartFailedError };

/** Organization names are labels chosen by the embedder, bounded like every stored string. */
const MAX_ORGANIZATION_NAME = 200;

export interface CreateOpspadOptions {
  /** Handlers of this app, added to the built-ins and to the modules named in OPSPAD_HANDLERS. */
  handlers?: readonly Handler[];
  /**
   * Settings by the names of docs/configuration.md (`DATABASE_URL`, `REDIS_URL`,
   * `PORT`, …), as strings. Default: `process.env`. Given, it is the whole configuration: spread
   * `process.env` into it to add to the environment rather than replace it.
   */
  env?: Readonly<Record<string, string | undefined>>;
  /** A pino logger; default: JSON lines at `OPSPAD_LOG_LEVEL` (pretty on a terminal). */
  logger?: Logger;
  /** Serve the HTTP API on `HOST:PORT` (default true). */
  api?: boolean;
  /** Run workers, the reconciler and the reorganization scheduler in this process (default true). */
  workers?: boolean;
  /**
   * The application registered an OpenTelemetry SDK of its own: opspad's spans go to it, BullMQ
   * jobs carry the trace context to the workers, and OTEL_EXPORTER_OTLP_* are not used (default
   * false).
   */
  externalTracing?: boolean;
}

export interface CreatedApiKey {
  organization_id: string;
  key_id: string;
  /** Shown once: only its SHA-256 is stored. */
  api_key: string;
}

/** A running opspad. */
export interface OpspadService {
  /** Base URL of the HTTP API (e.g. `http://127.0.0.1:3000`); undefined with `api: false`. */
  readonly url: string | undefined;
  /** Operation types this process has a handler for (the built-ins `webhook` and `demo` too). */
  readonly handlerTypes: readonly string[];
  /** Operator credentials for Bull Board, /metrics and /admin/operations. */
  readonly admin: { readonly user: string; readonly password: string };
  /** True when `admin.password` was generated because OPSPAD_ADMIN_PASSWORD is unset. */
  readonly adminPasswordGenerated: boolean;
  /** Creates an API key for an organization (created when new), as `opspad keys create` does. */
  createApiKey(organization: string): Promise<CreatedApiKey>;
  /** Graceful stop: no new requests, running batches finish (or are given back), connections close. */
  close(): Promise<void>;
}

/**
 * Starts opspad in this process: applies the migrations, then serves the HTTP API and runs the
 * workers (each can be turned off). Throws {@link ConfigError} when a setting it uses is invalid
 * (with `api: false`, those of the HTTP API and the operator pages are not read). When a
 * start step fails (the database or Redis unreachable, the port taken, a handler module that
 * throws), everything opened before it is closed again and the promise rejects with a
 * {@link StartFailedError} naming the step (`error.step`), the cause in `error.cause`.
 *
 * @example
 * import { createOpspad } from 'opspad';
 * import sendSms from './handlers/send-sms.js';
 *
 * const opspad = await createOpspad({ handlers: [sendSms] });
 * process.once('SIGTERM', () => void opspad.close());
 */
export async function createOpspad(options: CreateOpspadOptions = {}): Promise<OpspadService> {
  // Only what this process uses: without the API, its settings (the admin password among them) are not read.
  const env = options.env ?? process.env;
  const config =
    options.api === false ? loadSettings(SERVICE_PARTS, env) : loadSettings([...SERVICE_PARTS, ...API_PARTS], env);
  const logger = options.logger ?? createLogger(config.OPSPAD_LOG_LEVEL);
  const service = await createService({
    config,
    logger,
    handlers: options.handlers,
    api: options.api,
    workers: options.workers,
    externalTracing: options.externalTracing,
  });
  return {
    url: service.url,
    handlerTypes: service.handlers.types,
    admin: service.admin,
    adminPasswordGenerated: service.adminPasswordGenerated,
    async createApiKey(organization) {
      const name = typeof organization === 'string' ? organization.trim() : '';
      if (name.length === 0 || name.length > MAX_ORGANIZATION_NAME) {
        throw new TypeError(
          `createApiKey: organization must be a name of 1 to ${MAX_ORGANIZATION_NAME} characters (got ${JSON.stringify(organization)?.slice(0, 50)})`,
        );
      }
      const created = await createApiKey(service.db, name);
      return { organization_id: created.organization_id, key_id: created.key_id, api_key: created.api_key };
    },
    close: () => service.close(),
  };
}
