/**
 * The variables opspad reads, in parts (the database, the queue, the HTTP API, the operator
 * surfaces, the workers…), each a zod shape with the variables it no longer reads. What reads
 * them, and how a command picks its parts, is src/config/env.ts.
 */
import { z } from 'zod';
import { allowListProblems } from '../egress/allow-list.ts';
import {
  clusterNodes,
  duration,
  durationOrZero,
  flag,
  keepCount,
  keyValueList,
  list,
  perWindow,
  port,
  positiveInt,
  retention,
  trustProxy,
  url,
} from './parsers.ts';

/** The samplers of OTEL_TRACES_SAMPLER that opspad builds (the specification's built-in ones). */
export const TRACE_SAMPLERS = [
  'always_on',
  'always_off',
  'traceidratio',
  'parentbased_always_on',
  'parentbased_always_off',
  'parentbased_traceidratio',
] as const;

export const QUEUE_BACKENDS = ['redis', 'postgres'] as const;
export type QueueBackendKind = (typeof QUEUE_BACKENDS)[number];
/** The Redis of `OPSPAD_QUEUE_BACKEND=redis` without a REDIS_URL. */
export const DEFAULT_REDIS_URL = 'redis://127.0.0.1:6379';
/** The shortest OPSPAD_ADMIN_PASSWORD accepted: it guards Bull Board, /metrics and the operator page. */
export const ADMIN_PASSWORD_MIN_LENGTH = 8;

/**
 * Variables opspad no longer reads, and what replaced them. Setting one stops the commands that
 * deal with webhooks: ignoring it would quietly change what the operator asked for (an allow
 * list that no longer restricts).
 */
const REMOVED_WEBHOOK_VARIABLES: Readonly<Record<string, string>> = {
  OPSPAD_WEBHOOK_SECRET:
    'was removed: webhooks are signed with a secret per organization (opspad webhooks secret --org <name>); unset it',
  OPSPAD_WEBHOOK_ALLOWED_HOSTS:
    'was removed: the webhook handler may call any public address and refuses private ones; list exceptions in OPSPAD_WEBHOOK_ALLOW and unset it',
};

/** A group of variables read together, and the removed variables that refuse to go unnoticed there. */
export interface SettingsPart<Shape extends z.ZodRawShape = z.ZodRawShape> {
  readonly schema: z.ZodObject<Shape>;
  readonly removed?: Readonly<Record<string, string>>;
}

const part = <Shape extends z.ZodRawShape>(shape: Shape, removed?: Readonly<Record<string, string>>) =>
  ({ schema: z.object(shape), removed }) satisfies SettingsPart<Shape>;

/** How the process logs and how long it may take to stop: every command that runs opspad. */
const processPart = part({
  OPSPAD_LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  /** One bound for a whole shutdown; past it the process exits with code 3, naming the stuck step. */
  OPSPAD_SHUTDOWN_TIMEOUT: duration.default(15_000),
});

/** Where the HTTP API listens, and where client commands look for it without OPSPAD_URL. */
const addressPart = part({
  PORT: port.default(3000),
  HOST: z.string().trim().min(1).default('127.0.0.1'),
});

const databasePart = part({
  /** Unset: an embedded PGlite database under OPSPAD_DATA_DIR. */
  DATABASE_URL: url(['postgres:', 'postgresql:']).optional(),
  /**
   * The server itself when DATABASE_URL goes through a pooler in transaction mode (PgBouncer):
   * migrations, the reconciler's lock and the Postgres queue backend (LISTEN) run on it.
   */
  DATABASE_DIRECT_URL: url(['postgres:', 'postgresql:']).optional(),
  OPSPAD_DATA_DIR: z.string().trim().min(1).default('./.opspad'),
  OPSPAD_PG_POOL_SIZE: positiveInt.default(10),
});

const queuePart = part({
  /** Unset (and OPSPAD_QUEUE_BACKEND unset): jobs live in Postgres, not Redis. */
  REDIS_URL: url(['redis:', 'rediss:']).optional(),
  /** A Redis Cluster's seed nodes instead of REDIS_URL (one Redis). */
  REDIS_CLUSTER_NODES: clusterNodes.optional(),
  /** Where BullMQ keeps jobs; unset: `redis` when REDIS_URL or REDIS_CLUSTER_NODES is set, else `postgres`. */
  OPSPAD_QUEUE_BACKEND: z.enum(QUEUE_BACKENDS, { error: `must be ${QUEUE_BACKENDS.join(' or ')}` }).optional(),
  OPSPAD_QUEUE_PREFIX: z
    .string()
    .regex(/^[A-Za-z0-9_.-]{1,64}$/, 'use 1 to 64 letters, digits, dot, dash or underscore')
    .default('opspad'),
});

/** What one call may make opspad store (src/domain/size-limits.ts), read by the API and the workers. */
const limitsPart = part({
  OPSPAD_MAX_ITEMS: positiveInt.default(1_000_000),
  OPSPAD_MAX_QUERY_PARAMS_BYTES: positiveInt.default(16 * 1024),
  OPSPAD_MAX_NOTE_BYTES: positiveInt.default(64 * 1024),
  OPSPAD_MAX_SCRATCHPAD_BYTES: positiveInt.default(256 * 1024),
  /** At most 512: the id is a B-tree key, and 512 characters stay within Postgres's entry limit. */
  OPSPAD_MAX_ITEM_ID_LENGTH: positiveInt.pipe(z.number().max(512, 'must be at most 512')).default(512),
  /** Active background operations one organization may have at once. */
  OPSPAD_MAX_ACTIVE_BACKGROUND: positiveInt.default(100),
  /** The recitation of the structured scratchpad stays within this many characters. */
  OPSPAD_RECITE_MAX_CHARS: positiveInt.pipe(z.number().min(1000, 'must be at least 1000')).default(4000),
});

/** The handlers a service knows: the API checks operation types against them, workers run them. */
const handlersPart = part(
  {
    /** Comma-separated module paths whose exports are item handlers (see src/handlers/types.ts). */
    OPSPAD_HANDLERS: list.default([]),
    /**
     * Exceptions to the egress guard (host, host:port, IP, IP:port or CIDR): non-public addresses
     * the webhook handler may call anyway. See src/egress/allow-list.ts.
     */
    OPSPAD_WEBHOOK_ALLOW: list
      .superRefine((entries, ctx) => {
        for (const message of allowListProblems(entries)) {
          ctx.addIssue({ code: 'custom', message });
        }
      })
      .default([]),
  },
  REMOVED_WEBHOOK_VARIABLES,
);

const workersPart = part({
  /** Paused operations untouched this long are cancelled (e.g. 7d, 12h, 30m, 90s). */
  OPSPAD_PAUSED_TTL: duration.default(7 * 24 * 3600 * 1000),
  /** How long a worker's batch stays leased before another worker may take it over. */
  OPSPAD_LEASE_TTL: duration.default(120_000),
  /** How often the reconciler re-dispatches lost work and expires idle operations. */
  OPSPAD_RECONCILE_INTERVAL: duration.default(15_000),
  /** BullMQ job lock; a worker that dies is noticed within about this long. */
  OPSPAD_JOB_LOCK_TTL: duration.default(30_000),
  /**
   * Time budget of one batch (a handler's `batchTimeoutMs` overrides it): when it runs out the
   * handler's `ctx.signal` fires and items not yet handled go back to pending.
   */
  OPSPAD_BATCH_TIMEOUT: duration.default(60_000),
  /** How long a handler may hold its slot after its signal fired before the batch is abandoned. */
  OPSPAD_BATCH_GRACE: duration.default(5_000),
  /** How long a batch job goes on with its lane's next batches; 0: one batch per job. */
  OPSPAD_LANE_SLICE: durationOrZero.default(1_000),
});

/** What reorganizes scratchpads, and when. */
const reorganizerPart = part({
  /** Who reorganizes pads: unset, `openai` when OPSPAD_LLM_BASE_URL is set, else `builtin`. */
  OPSPAD_LLM_PROVIDER: z.enum(['builtin', 'openai', 'anthropic']).optional(),
  /** An OpenAI-compatible API (…/v1) or the Anthropic API (https://api.anthropic.com). */
  OPSPAD_LLM_BASE_URL: url(['http:', 'https:']).optional(),
  OPSPAD_LLM_API_KEY: z.string().min(1).optional(),
  OPSPAD_LLM_MODEL: z.string().min(1).optional(),
  OPSPAD_LLM_TIMEOUT: duration.default(60_000),
  /** The reorganization sweep's schedule: a cron pattern; unset, every OPSPAD_REORGANIZE_INTERVAL. */
  OPSPAD_REORGANIZE_CRON: z.string().min(9).optional(),
  OPSPAD_REORGANIZE_INTERVAL: duration.default(5 * 60_000),
  /** Pads one sweep hands out (one job each). */
  OPSPAD_REORGANIZE_SWEEP_BATCH: positiveInt.default(100),
});

/** How the HTTP API guards and bounds its requests. */
const apiPart = part({
  /** Large enough for 1,000,000 UUID-sized ids in one create. */
  OPSPAD_MAX_BODY_BYTES: positiveInt.default(64 * 1024 * 1024),
  /** The whole context fragment (operations and recited scratchpad) stays within this many o200k tokens. */
  OPSPAD_CONTEXT_MAX_TOKENS: positiveInt.pipe(z.number().min(300, 'must be at least 300')).default(1500),
  /** Requests per API key on /v1, as `<count>/<duration>` (e.g. 1000/1s, 600/1m); 429 beyond. */
  OPSPAD_RATE_LIMIT: perWindow.default({ max: 1000, windowMs: 1000 }),
  /** Event streams one API key may hold open at once, across every API process. */
  OPSPAD_MAX_STREAMS_PER_KEY: positiveInt.default(10),
  /** An event stream sends a comment line after this long without writing anything. */
  OPSPAD_STREAM_HEARTBEAT: duration.default(15_000),
  /** An event stream on a paused operation that has nothing to say for this long ends. */
  OPSPAD_STREAM_IDLE_TIMEOUT: duration.default(10 * 60_000),
  /** How often an event stream checks that its API key is still valid (ends once revoked). */
  OPSPAD_STREAM_KEY_CHECK: duration.default(5_000),
  /**
   * How long an API process trusts a key it found without looking it up again (0: every
   * request). A key revoked by another process is refused within this long; by this one, at once.
   */
  OPSPAD_API_KEY_CACHE_TTL: z.union([z.literal(0), z.literal('0').transform(() => 0), duration]).default(5_000),
});

/**
 * Who may try to sign in: failed API-key or operator sign-ins per client address, and the proxies
 * trusted to name that address. Read by whatever serves the API or a metrics port.
 */
const signInPart = part({
  /** Failed API-key or operator sign-ins per client address; beyond, 429 before any lookup. */
  OPSPAD_AUTH_FAILURE_LIMIT: perWindow.default({ max: 20, windowMs: 60_000 }),
  /** Proxies whose X-Forwarded-For names the client (see trustProxy). */
  OPSPAD_TRUST_PROXY: trustProxy.optional(),
});

/** Metrics and traces of every process that runs opspad (src/telemetry/, src/api/metrics-server.ts). */
const telemetryPart = part({
  /**
   * Serve `/metrics` (with `/healthz` and `/readyz`) on this port in every process, workers
   * included, behind the operator sign-in; unset: only the API serves `/metrics`.
   */
  OPSPAD_METRICS_PORT: port.optional(),
  /** Where the metrics port listens; loopback unless a scraper elsewhere must reach it. */
  OPSPAD_METRICS_HOST: z.string().trim().min(1).default('127.0.0.1'),
  /** OTLP/HTTP collector base URL (traces go to `<it>/v1/traces`); unset: no traces, nothing loaded. */
  OTEL_EXPORTER_OTLP_ENDPOINT: url(['http:', 'https:']).optional(),
  /** The full URL traces are posted to; overrides OTEL_EXPORTER_OTLP_ENDPOINT for traces. */
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: url(['http:', 'https:']).optional(),
  /** Headers sent with every export (e.g. `authorization=Bearer%20…`). */
  OTEL_EXPORTER_OTLP_HEADERS: keyValueList.optional(),
  /** Milliseconds one export may take. */
  OTEL_EXPORTER_OTLP_TIMEOUT: positiveInt.optional(),
  OTEL_SERVICE_NAME: z.string().trim().min(1).max(255).default('opspad'),
  /** More resource attributes, e.g. `deployment.environment=prod`. */
  OTEL_RESOURCE_ATTRIBUTES: keyValueList.optional(),
  OTEL_TRACES_SAMPLER: z
    .enum(TRACE_SAMPLERS, { error: `must be one of ${TRACE_SAMPLERS.join(', ')}` })
    .default('parentbased_always_on'),
  /** The ratio of the traceidratio samplers, from 0 to 1. */
  OTEL_TRACES_SAMPLER_ARG: z.coerce
    .number({ error: 'must be a number from 0 to 1' })
    .min(0, 'must be a number from 0 to 1')
    .max(1, 'must be a number from 0 to 1')
    .optional(),
  /** Milliseconds between two exports of finished spans. */
  OTEL_BSP_SCHEDULE_DELAY: positiveInt.optional(),
  /** `true`: no traces even with an endpoint set. */
  OTEL_SDK_DISABLED: flag.default(false),
});

/** How long finished work is kept (src/config/retention.ts); the reconciler of any process prunes. */
const retentionPart = part({
  /**
   * Retention (src/config/retention.ts): finished operations lose their item rows this long
   * after they finished (their row, counts and failures stay); the other periods default to it.
   */
  OPSPAD_RETENTION: retention.default(30 * 24 * 3600 * 1000),
  /** Batch-level audit events of finished operations, and pad reorganization events. */
  OPSPAD_RETENTION_EVENTS: retention.optional(),
  /** Notes traces: an ended execution's, this long after its end; conversation-scope ones by age. */
  OPSPAD_RETENTION_TRACES: retention.optional(),
  /** Context renders (what the assistant was told each turn), by age. */
  OPSPAD_RETENTION_RENDERS: retention.optional(),
  /** Versions kept per structured pad, the newest; older ones are deleted. */
  OPSPAD_RETENTION_PAD_VERSIONS: keepCount.optional(),
  /** Failure rows kept per pruned operation (the first ones); the rest become counts by reason. */
  OPSPAD_RETENTION_FAILURES: z.coerce
    .number({ error: 'must be a whole number' })
    .int('must be a whole number')
    .min(0, 'must be 0 or more')
    .max(100_000, 'must be at most 100000')
    .default(1000),
  /** Rows one retention statement deletes at most: each is a short transaction of its own. */
  OPSPAD_RETENTION_BATCH: positiveInt.pipe(z.number().max(50_000, 'must be at most 50000')).default(5000),
  /** Time one retention run may take; what is left waits for the next reconciler pass. */
  OPSPAD_RETENTION_BUDGET: duration.default(5000),
});

/** Bull Board, /metrics and the operator page: read by whatever serves them. */
const adminPart = part({
  OPSPAD_ADMIN_USER: z.string().min(1).default('admin'),
  /** Unset: a random password, printed once at start. */
  OPSPAD_ADMIN_PASSWORD: z
    .string()
    .min(
      ADMIN_PASSWORD_MIN_LENGTH,
      `must be at least ${ADMIN_PASSWORD_MIN_LENGTH} characters: choose a longer one, or unset it for a random one printed at start`,
    )
    .optional(),
  /** Bull Board and the operator page show, and change nothing. */
  OPSPAD_ADMIN_READONLY: flag.default(false),
});

/** `opspad webhooks secret`. */
const webhookSecretsPart = part(
  {
    /** After `opspad webhooks secret --rotate`, how long the previous secret keeps signing too. */
    OPSPAD_WEBHOOK_ROTATION_GRACE: duration.default(24 * 3600 * 1000),
  },
  REMOVED_WEBHOOK_VARIABLES,
);

/** Client commands (`opspad ops watch`, `opspad mcp`, `opspad demo` beside a running service). */
const clientPart = part({
  /** The API to talk to; default http://HOST:PORT. */
  OPSPAD_URL: url(['http:', 'https:']).optional(),
  /** The API key to send. */
  OPSPAD_API_KEY: z.string().min(1).optional(),
});

/** Every part, by name; a command lists the names of those it reads. */
export const SETTINGS_PARTS = {
  process: processPart,
  address: addressPart,
  database: databasePart,
  queue: queuePart,
  limits: limitsPart,
  handlers: handlersPart,
  workers: workersPart,
  reorganizer: reorganizerPart,
  api: apiPart,
  signIn: signInPart,
  admin: adminPart,
  telemetry: telemetryPart,
  retention: retentionPart,
  webhookSecrets: webhookSecretsPart,
  client: clientPart,
} as const;
