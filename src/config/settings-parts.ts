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
  keyValueList,
  list,
  perWindow,
  port,
  positiveInt,
  postgresUrl,
  text,
  url,
} from './parsers.ts';
import { HOSTED_MCP_SETTINGS, SIGN_IN_SETTINGS } from './settings-access.ts';
import { HANDLER_CONCURRENCY_SETTINGS } from './settings-handler-concurrency.ts';
import { RETENTION_SETTINGS } from './settings-retention.ts';
import { TENANT_BOUND_SETTINGS } from './settings-tenant-bounds.ts';

declare module 'zod' {
  interface GlobalMeta {
    /**
     * Every setting's meta has a `description` (one sentence: what it does, its unit); a setting
     * that bounds something a tenant controls also names that quantity in `bound`. The
     * configuration page and the README's bounds table are generated from them.
     */
    bound?: string;
  }
}

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
  OPSPAD_LOG_LEVEL: z
    .enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'])
    .default('info')
    .meta({ description: 'The pino log level; logs are JSON lines on stdout, pretty on a terminal.' }),
  OPSPAD_SHUTDOWN_TIMEOUT: duration.default(15_000).meta({
    description: 'Bound on a whole shutdown; past it the process exits with code 3, naming the step it waited for.',
  }),
});

/** Where the HTTP API listens, and where client commands look for it without OPSPAD_URL. */
const addressPart = part({
  PORT: port.default(3000).meta({ description: 'The HTTP port of the API (and where client commands look for it).' }),
  HOST: text.default('127.0.0.1').meta({ description: 'The address the API listens on (`0.0.0.0` in containers).' }),
});

const databasePart = part({
  DATABASE_URL: postgresUrl.optional().meta({
    description:
      "The Postgres server holding opspad's data (libpq's host list finds the writable node); unset: an embedded PGlite database in OPSPAD_DATA_DIR.",
  }),
  // Migrations, the reconciler's session lock and the Postgres queue backend's LISTEN need a
  // session of their own, which a pooler in transaction mode does not give.
  DATABASE_DIRECT_URL: postgresUrl.optional().meta({
    description:
      "The Postgres server itself when DATABASE_URL is a pooler in transaction mode (PgBouncer): migrations, the reconciler's lock and the Postgres queue backend use it.",
  }),
  OPSPAD_DATA_DIR: text
    .default('./.opspad')
    .meta({ description: 'Where the embedded database and its control socket live when DATABASE_URL is unset.' }),
  OPSPAD_PG_POOL_SIZE: positiveInt
    .default(10)
    .meta({ description: 'Postgres connections per process (the Postgres queue backend opens a pool of its own).' }),
});

const queuePart = part({
  REDIS_URL: url(['redis:', 'rediss:']).optional().meta({
    description: 'The Redis holding the job queues; unset (and OPSPAD_QUEUE_BACKEND unset): the jobs live in Postgres.',
  }),
  REDIS_CLUSTER_NODES: clusterNodes.optional().meta({
    description:
      "A Redis Cluster's seed nodes (`host:port` or `redis://` URLs, comma-separated), instead of REDIS_URL.",
  }),
  OPSPAD_QUEUE_BACKEND: z
    .enum(QUEUE_BACKENDS, { error: `must be ${QUEUE_BACKENDS.join(' or ')}` })
    .optional()
    .meta({
      description:
        'Where BullMQ keeps jobs, `redis` or `postgres`; unset: `redis` when REDIS_URL or REDIS_CLUSTER_NODES is set, else `postgres`.',
    }),
  OPSPAD_QUEUE_PREFIX: z
    .string()
    .regex(/^[A-Za-z0-9_.-]{1,64}$/, 'use 1 to 64 letters, digits, dot, dash or underscore')
    .default('opspad')
    .meta({
      description:
        "The queues' Redis key prefix (`{prefix}` on a cluster) and Postgres schema (`bullmq_<prefix>`): one per deployment.",
    }),
});

/** What one call may make opspad store (src/domain/size-limits.ts), read by the API and the workers. */
const limitsPart = part({
  OPSPAD_MAX_ITEMS: positiveInt
    .default(1_000_000)
    .meta({ description: 'The most items one operation may hold.', bound: 'items per operation' }),
  OPSPAD_MAX_QUERY_PARAMS_BYTES: positiveInt.default(16 * 1024).meta({
    description: 'The largest `query_params` of an operation, in bytes of stored JSON.',
    bound: "bytes of an operation's query_params",
  }),
  OPSPAD_MAX_NOTE_BYTES: positiveInt.default(64 * 1024).meta({
    description: "The largest note, in bytes: a scratchpad note, a persistent note, an operation's `notes`.",
    bound: 'bytes per note',
  }),
  OPSPAD_MAX_SCRATCHPAD_BYTES: positiveInt.default(256 * 1024).meta({
    description: 'The largest structured scratchpad, and what one write may add, in bytes of stored JSON.',
    bound: 'bytes per structured scratchpad',
  }),
  // The id is a B-tree key, and 512 characters stay within Postgres's entry limit.
  OPSPAD_MAX_ITEM_ID_LENGTH: positiveInt
    .pipe(z.number().max(512, 'must be at most 512'))
    .default(512)
    .meta({ description: 'The longest item id, in characters (at most 512).', bound: 'characters per item id' }),
  OPSPAD_MAX_ACTIVE_BACKGROUND: positiveInt.default(100).meta({
    description: 'Active background operations one organization may have at once; a create beyond is refused (409).',
    bound: 'active background operations per organization',
  }),
  OPSPAD_RECITE_MAX_CHARS: positiveInt.pipe(z.number().min(1000, 'must be at least 1000')).default(4000).meta({
    description: 'Budget of the recited structured scratchpad in the context fragment, in characters (at least 1000).',
    bound: 'characters of a recited scratchpad',
  }),
  ...TENANT_BOUND_SETTINGS,
});

/** The handlers a service knows: the API checks operation types against them, workers run them. */
const handlersPart = part(
  {
    OPSPAD_HANDLERS: list.default([]).meta({
      description: 'Handler modules to load, comma-separated paths relative to the working directory.',
    }),
    OPSPAD_WEBHOOK_ALLOW: list
      .superRefine((entries, ctx) => {
        for (const message of allowListProblems(entries)) {
          ctx.addIssue({ code: 'custom', message });
        }
      })
      .default([])
      .meta({
        description:
          'Non-public addresses the webhook handler may call anyway, comma-separated: host[:port], IP[:port] or CIDR.',
      }),
    ...HANDLER_CONCURRENCY_SETTINGS,
  },
  REMOVED_WEBHOOK_VARIABLES,
);

const workersPart = part({
  OPSPAD_PAUSED_TTL: duration.default(7 * 24 * 3600 * 1000).meta({
    description: 'Paused operations untouched this long are cancelled by the reconciler.',
    bound: 'lifetime of an untouched paused operation',
  }),
  OPSPAD_LEASE_TTL: duration
    .default(120_000)
    .meta({ description: "How long a worker's batch stays leased before another worker may take it over." }),
  OPSPAD_RECONCILE_INTERVAL: duration.default(15_000).meta({
    description: 'How often the reconciler re-dispatches lost work, returns expired leases and runs retention.',
  }),
  OPSPAD_JOB_LOCK_TTL: duration
    .default(30_000)
    .meta({ description: "BullMQ's job lock: a worker that dies is noticed within about this long." }),
  OPSPAD_BATCH_TIMEOUT: duration.default(60_000).meta({
    description:
      "Time budget of one batch (a handler's `batchTimeoutMs` overrides it): then `ctx.signal` fires and unhandled items go back to pending.",
    bound: 'time one batch may hold a worker slot',
  }),
  OPSPAD_BATCH_GRACE: duration.default(5_000).meta({
    description: 'How long a handler that ignores its signal keeps its slot before the batch is abandoned.',
    bound: 'time a handler ignoring its signal keeps its slot',
  }),
  OPSPAD_LANE_SLICE: durationOrZero.default(1_000).meta({
    description: "How long a batch job goes on with its lane's next batches; `0`: one batch per job.",
  }),
});

/** What reorganizes scratchpads, and when. */
const reorganizerPart = part({
  OPSPAD_LLM_PROVIDER: z.enum(['builtin', 'openai', 'anthropic']).optional().meta({
    description: 'Who reorganizes pads; unset: `openai` when OPSPAD_LLM_BASE_URL is set, else `builtin`.',
  }),
  OPSPAD_LLM_BASE_URL: url(['http:', 'https:']).optional().meta({
    description: "The model's API: OpenAI-compatible (`…/v1`) or Anthropic's; unset: the provider's own.",
  }),
  OPSPAD_LLM_API_KEY: z.string().min(1).optional().meta({ description: "The key sent to the model's API." }),
  OPSPAD_LLM_MODEL: z
    .string()
    .min(1)
    .optional()
    .meta({ description: 'The model that reorganizes pads; unset: gpt-4o-mini or claude-sonnet-4-5.' }),
  OPSPAD_LLM_TIMEOUT: duration.default(60_000).meta({ description: 'Time one model call may take.' }),
  OPSPAD_REORGANIZE_CRON: z.string().min(9).optional().meta({
    description: "The reorganization sweep's schedule as a cron pattern; unset: every OPSPAD_REORGANIZE_INTERVAL.",
  }),
  OPSPAD_REORGANIZE_INTERVAL: duration
    .default(5 * 60_000)
    .meta({ description: "The reorganization sweep's interval when no cron pattern is set." }),
  OPSPAD_REORGANIZE_SWEEP_BATCH: positiveInt
    .default(100)
    .meta({ description: 'Pads one reorganization sweep hands out, one job each.' }),
});

/** How the HTTP API guards and bounds its requests. */
const apiPart = part({
  OPSPAD_MAX_BODY_BYTES: positiveInt.default(64 * 1024 * 1024).meta({
    description: 'The largest body of the operation tool, in bytes after decompression (64 MiB: a million UUIDs).',
    bound: 'bytes of an operation-tool request body',
  }),
  OPSPAD_CONTEXT_MAX_TOKENS: positiveInt.pipe(z.number().min(300, 'must be at least 300')).default(1500).meta({
    description: 'Budget of the whole context fragment, in o200k tokens (at least 300).',
    bound: 'tokens of a context fragment',
  }),
  OPSPAD_RATE_LIMIT: perWindow.default({ max: 1000, windowMs: 1000 }).meta({
    description: 'Requests per API key on `/v1`, as `<count>/<duration>`; beyond, 429 with Retry-After.',
    bound: 'requests per API key',
  }),
  OPSPAD_MAX_STREAMS_PER_KEY: positiveInt.default(10).meta({
    description:
      'Event streams and results files one API key may hold open at once, across every API process; beyond, 429.',
    bound: 'open event streams and results files per API key',
  }),
  OPSPAD_STREAM_HEARTBEAT: duration
    .default(15_000)
    .meta({ description: 'An event stream sends a heartbeat comment after this long without a write.' }),
  OPSPAD_STREAM_IDLE_TIMEOUT: duration.default(10 * 60_000).meta({
    description: 'An event stream on a paused operation ends after this long without news.',
    bound: 'idle time of an event stream',
  }),
  OPSPAD_STREAM_KEY_CHECK: duration.default(5_000).meta({
    description: 'How often an event stream checks that its API key is not revoked (and ends once it is).',
  }),
  OPSPAD_API_KEY_CACHE_TTL: z
    .union([z.literal(0), z.literal('0').transform(() => 0), duration])
    .default(5_000)
    .meta({
      description:
        'How long an API process trusts a key it found (`0`: never): a key revoked through another process is refused within it.',
    }),
});

/** Metrics and traces of every process that runs opspad (src/telemetry/, src/api/metrics-server.ts). */
const telemetryPart = part({
  OPSPAD_METRICS_PORT: port.optional().meta({
    description:
      'Serve `/metrics`, `/healthz` and `/readyz` on this port in every process, workers included (`0`: any free port).',
  }),
  OPSPAD_METRICS_HOST: text
    .default('127.0.0.1')
    .meta({ description: 'Where the metrics port listens; loopback unless a scraper elsewhere must reach it.' }),
  OTEL_EXPORTER_OTLP_ENDPOINT: url(['http:', 'https:']).optional().meta({
    description: 'OTLP/HTTP collector; traces go to `<it>/v1/traces`; unset: no traces, and nothing of tracing loaded.',
  }),
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: url(['http:', 'https:'])
    .optional()
    .meta({ description: "The full URL traces are posted to, instead of OTEL_EXPORTER_OTLP_ENDPOINT's." }),
  OTEL_EXPORTER_OTLP_HEADERS: keyValueList
    .optional()
    .meta({ description: 'Headers sent with every export, `key=value,…` with percent-encoded values.' }),
  OTEL_EXPORTER_OTLP_TIMEOUT: positiveInt
    .optional()
    .meta({ description: 'Milliseconds one export may take; unset: 10000.' }),
  OTEL_SERVICE_NAME: text.max(255).default('opspad').meta({ description: "The traces' service name." }),
  OTEL_RESOURCE_ATTRIBUTES: keyValueList
    .optional()
    .meta({ description: 'More resource attributes of the traces, `key=value,…`.' }),
  OTEL_TRACES_SAMPLER: z
    .enum(TRACE_SAMPLERS, { error: `must be one of ${TRACE_SAMPLERS.join(', ')}` })
    .default('parentbased_always_on')
    .meta({ description: "The sampler, one of the OpenTelemetry specification's built-in ones." }),
  OTEL_TRACES_SAMPLER_ARG: z.coerce
    .number({ error: 'must be a number from 0 to 1' })
    .min(0, 'must be a number from 0 to 1')
    .max(1, 'must be a number from 0 to 1')
    .optional()
    .meta({ description: 'The ratio of the `traceidratio` samplers, from 0 to 1.' }),
  OTEL_BSP_SCHEDULE_DELAY: positiveInt
    .optional()
    .meta({ description: 'Milliseconds between two exports of finished spans; unset: 5000.' }),
  OTEL_SDK_DISABLED: flag.default(false).meta({ description: '`true`: no traces, even with an endpoint set.' }),
});

/** Bull Board, /metrics and the operator page: read by whatever serves them. */
const adminPart = part({
  OPSPAD_ADMIN_USER: z
    .string()
    .min(1)
    .default('admin')
    .meta({ description: "The operator sign-in's user: Bull Board, the operator view and `/metrics`." }),
  OPSPAD_ADMIN_PASSWORD: z
    .string()
    .min(
      ADMIN_PASSWORD_MIN_LENGTH,
      `must be at least ${ADMIN_PASSWORD_MIN_LENGTH} characters: choose a longer one, or unset it for a random one printed at start`,
    )
    .optional()
    .meta({ description: 'The operator password, at least 8 characters; unset: a random one, printed once at start.' }),
  OPSPAD_ADMIN_READONLY: flag
    .default(false)
    .meta({ description: '`true`: Bull Board and the operator view show everything and change nothing.' }),
  OPSPAD_MAX_BULK_OPERATIONS: positiveInt.default(10_000).meta({
    description:
      'The most operations one operator bulk action (pause, resume, cancel, retry_failed by filter) may take; a filter matching more is refused (400): narrow it.',
    bound: 'operations per bulk action',
  }),
});

/** `opspad webhooks secret`. */
const webhookSecretsPart = part(
  {
    OPSPAD_WEBHOOK_ROTATION_GRACE: duration.default(24 * 3600 * 1000).meta({
      description:
        'After `opspad webhooks secret --rotate`, how long the previous secret keeps signing beside the new one.',
    }),
  },
  REMOVED_WEBHOOK_VARIABLES,
);

/** Client commands (`opspad ops watch`, `opspad mcp`, `opspad demo` beside a running service). */
const clientPart = part({
  OPSPAD_URL: url(['http:', 'https:'])
    .optional()
    .meta({ description: 'The opspad API that `ops watch`, `mcp` and `demo` talk to; unset: `http://HOST:PORT`.' }),
  OPSPAD_API_KEY: z.string().min(1).optional().meta({ description: 'The API key client commands send.' }),
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
  hostedMcp: part(HOSTED_MCP_SETTINGS),
  signIn: part(SIGN_IN_SETTINGS),
  admin: adminPart,
  telemetry: telemetryPart,
  retention: part(RETENTION_SETTINGS),
  webhookSecrets: webhookSecretsPart,
  client: clientPart,
} as const;
