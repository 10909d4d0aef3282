/**
 * Every environment variable opspad reads, parsed once with zod. Nothing else in the codebase
 * reads `process.env`: the parsed {@link Config} is passed down explicitly.
 */
import { z } from 'zod';
import { allowListProblems } from '../egress/allow-list.ts';

const port = z.coerce.number({ error: 'must be a port number' }).int().min(0).max(65535, 'must be at most 65535');
const positiveInt = z.coerce
  .number({ error: 'must be a whole number' })
  .int('must be a whole number')
  .positive('must be greater than 0');

const url = (protocols: readonly string[]) =>
  z
    .string()
    .trim()
    .refine(
      (value) => {
        try {
          return protocols.includes(new URL(value).protocol);
        } catch {
          return false;
        }
      },
      `must be a URL starting with ${protocols.map((p) => `${p}//`).join(' or ')}`,
    );

const list = z
  .string()
  .transform((value) =>
    value
      .split(',')
      .map((part) => part.trim())
      .filter((part) => part.length > 0),
  )
  .pipe(z.array(z.string()));

const DURATION_UNITS_MS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/** A duration such as `7d`, `12h`, `30m`, `15s`, `500ms`, or a plain number of milliseconds. */
const duration = z
  .union([z.number(), z.string()])
  .transform((value, ctx) => {
    const match = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$/.exec(String(value));
    if (!match) {
      ctx.addIssue({ code: 'custom', message: 'must be a duration such as 500ms, 30s, 15m, 12h or 7d' });
      return z.NEVER;
    }
    const unit = (match[2] ?? 'ms') as keyof typeof DURATION_UNITS_MS;
    return Math.round(Number(match[1]) * DURATION_UNITS_MS[unit]);
  })
  .pipe(z.number().int().positive('must be longer than 0'));

/** `<count>/<duration>`, e.g. `1000/1s` or `600/1m`: at most count events per window. */
const perWindow = z
  .string()
  .regex(/^\s*\d+\s*\/\s*\d+(?:\.\d+)?\s*(?:ms|s|m|h|d)?\s*$/, 'must look like 1000/1s or 600/1m')
  .transform((value) => {
    const [count, window] = value.split('/') as [string, string];
    return { max: Number(count.trim()), windowMs: duration.parse(window.trim()) };
  })
  .pipe(z.object({ max: z.number().int().positive('the count must be above 0'), windowMs: z.number() }));

/** `true` or `false` (also 1/0, yes/no, on/off). */
const flag = z.union([z.boolean(), z.string()]).transform((value, ctx) => {
  const text = String(value).trim().toLowerCase();
  if (['true', '1', 'yes', 'on'].includes(text)) {
    return true;
  }
  if (['false', '0', 'no', 'off'].includes(text)) {
    return false;
  }
  ctx.addIssue({ code: 'custom', message: 'must be true or false' });
  return z.NEVER;
});

/**
 * Express's `trust proxy`: how many proxies in front of opspad to trust (a number), or which
 * ones (addresses, subnets, `loopback`, `linklocal`, `uniquelocal`). Unset: none, and a client's
 * address is the connection's. Trusting every proxy (`true`) is refused: any client could then
 * choose its own address with X-Forwarded-For and escape per-address limits.
 */
const trustProxy = z
  .string()
  .trim()
  .transform((value, ctx) => {
    if (/^\d+$/.test(value)) {
      return Number(value);
    }
    const parts = value
      .split(',')
      .map((part) => part.trim())
      .filter((part) => part.length > 0);
    const valid = (part: string) =>
      ['loopback', 'linklocal', 'uniquelocal'].includes(part) || /^[0-9A-Fa-f:.]+(?:\/\d{1,3})?$/.test(part);
    if (parts.length === 0 || !parts.every(valid)) {
      ctx.addIssue({
        code: 'custom',
        message: 'must be a number of proxies, or addresses, subnets, loopback, linklocal or uniquelocal',
      });
      return z.NEVER;
    }
    return parts;
  });

export const QUEUE_BACKENDS = ['redis', 'postgres'] as const;
export type QueueBackendKind = (typeof QUEUE_BACKENDS)[number];
/** The Redis of `OPSPAD_QUEUE_BACKEND=redis` without a REDIS_URL. */
export const DEFAULT_REDIS_URL = 'redis://127.0.0.1:6379';

export const EnvSchema = z.object({
  PORT: port.default(3000),
  HOST: z.string().trim().min(1).default('127.0.0.1'),
  /** Unset: an embedded PGlite database under OPSPAD_DATA_DIR. */
  DATABASE_URL: url(['postgres:', 'postgresql:']).optional(),
  OPSPAD_DATA_DIR: z.string().trim().min(1).default('./.opspad'),
  /** Unset (and OPSPAD_QUEUE_BACKEND unset): jobs live in Postgres, not Redis. */
  REDIS_URL: url(['redis:', 'rediss:']).optional(),
  /** Where BullMQ keeps jobs; unset: `redis` when REDIS_URL is set, else `postgres`. */
  OPSPAD_QUEUE_BACKEND: z.enum(QUEUE_BACKENDS, { error: `must be ${QUEUE_BACKENDS.join(' or ')}` }).optional(),
  OPSPAD_QUEUE_PREFIX: z
    .string()
    .regex(/^[A-Za-z0-9_.-]{1,64}$/, 'use 1 to 64 letters, digits, dot, dash or underscore')
    .default('opspad'),
  OPSPAD_MAX_ITEMS: positiveInt.default(1_000_000),
  /** Large enough for 1,000,000 UUID-sized ids in one create. */
  OPSPAD_MAX_BODY_BYTES: positiveInt.default(64 * 1024 * 1024),
  /** Size limits of what one call may store (src/domain/size-limits.ts). */
  OPSPAD_MAX_QUERY_PARAMS_BYTES: positiveInt.default(16 * 1024),
  OPSPAD_MAX_NOTE_BYTES: positiveInt.default(64 * 1024),
  OPSPAD_MAX_SCRATCHPAD_BYTES: positiveInt.default(256 * 1024),
  /** At most 512: the id is a B-tree key, and 512 characters stay within Postgres's entry limit. */
  OPSPAD_MAX_ITEM_ID_LENGTH: positiveInt.pipe(z.number().max(512, 'must be at most 512')).default(512),
  OPSPAD_LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  OPSPAD_PG_POOL_SIZE: positiveInt.default(10),
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
  /** After `opspad webhooks secret --rotate`, how long the previous secret keeps signing too. */
  OPSPAD_WEBHOOK_ROTATION_GRACE: duration.default(24 * 3600 * 1000),
  OPSPAD_ADMIN_USER: z.string().min(1).default('admin'),
  /** Unset: a random password, printed once at start. */
  OPSPAD_ADMIN_PASSWORD: z.string().min(8, 'use at least 8 characters').optional(),
  /** Paused operations untouched this long are cancelled (e.g. 7d, 12h, 30m, 90s). */
  OPSPAD_PAUSED_TTL: duration.default(7 * 24 * 3600 * 1000),
  /** How long a worker's batch stays leased before another worker may take it over. */
  OPSPAD_LEASE_TTL: duration.default(120_000),
  /** How often the reconciler re-dispatches lost work and expires idle operations. */
  OPSPAD_RECONCILE_INTERVAL: duration.default(15_000),
  /** One bound for a whole shutdown; past it the process exits with code 3, naming the stuck step. */
  OPSPAD_SHUTDOWN_TIMEOUT: duration.default(15_000),
  /** BullMQ job lock; a worker that dies is noticed within about this long. */
  OPSPAD_JOB_LOCK_TTL: duration.default(30_000),
  /**
   * Time budget of one batch (a handler's `batchTimeoutMs` overrides it): when it runs out the
   * handler's `ctx.signal` fires and items not yet handled go back to pending.
   */
  OPSPAD_BATCH_TIMEOUT: duration.default(60_000),
  /** How long a handler may hold its slot after its signal fired before the batch is abandoned. */
  OPSPAD_BATCH_GRACE: duration.default(5_000),
  /** Requests per API key on /v1, as `<count>/<duration>` (e.g. 1000/1s, 600/1m); 429 beyond. */
  OPSPAD_RATE_LIMIT: perWindow.default({ max: 1000, windowMs: 1000 }),
  /** Active background operations one organization may have at once. */
  OPSPAD_MAX_ACTIVE_BACKGROUND: positiveInt.default(100),
  /** The recitation of the structured scratchpad stays within this many characters. */
  OPSPAD_RECITE_MAX_CHARS: positiveInt.pipe(z.number().min(1000, 'must be at least 1000')).default(4000),
  /** The whole context fragment (operations and recited scratchpad) stays within this many o200k tokens. */
  OPSPAD_CONTEXT_MAX_TOKENS: positiveInt.pipe(z.number().min(300, 'must be at least 300')).default(1500),
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
  /** Failed API-key or operator sign-ins per client address; beyond, 429 before any lookup. */
  OPSPAD_AUTH_FAILURE_LIMIT: perWindow.default({ max: 20, windowMs: 60_000 }),
  /** Proxies whose X-Forwarded-For names the client (see trustProxy). */
  OPSPAD_TRUST_PROXY: trustProxy.optional(),
  /** Bull Board and the operator page show, and change nothing. */
  OPSPAD_ADMIN_READONLY: flag.default(false),
  /** Event streams one API key may hold open at once, across every API process. */
  OPSPAD_MAX_STREAMS_PER_KEY: positiveInt.default(10),
  /** An event stream sends a comment line after this long without writing anything. */
  OPSPAD_STREAM_HEARTBEAT: duration.default(15_000),
  /** An event stream on a paused operation that has nothing to say for this long ends. */
  OPSPAD_STREAM_IDLE_TIMEOUT: duration.default(10 * 60_000),
  /** How often an event stream checks that its API key is still valid (ends once revoked). */
  OPSPAD_STREAM_KEY_CHECK: duration.default(5_000),
  /** Client commands (`opspad ops …`): the API to talk to; default http://HOST:PORT. */
  OPSPAD_URL: url(['http:', 'https:']).optional(),
  /** Client commands: the API key to send. */
  OPSPAD_API_KEY: z.string().min(1).optional(),
});

/**
 * The parsed environment, with the queue backend decided: the one named, else Redis when
 * REDIS_URL is set (as before it became optional), else Postgres, which needs nothing more.
 */
export type Config = Omit<z.infer<typeof EnvSchema>, 'OPSPAD_QUEUE_BACKEND'> & {
  OPSPAD_QUEUE_BACKEND: QueueBackendKind;
};

function withQueueBackend(env: z.infer<typeof EnvSchema>): Config {
  const backend = env.OPSPAD_QUEUE_BACKEND ?? (env.REDIS_URL ? 'redis' : 'postgres');
  return {
    ...env,
    OPSPAD_QUEUE_BACKEND: backend,
    REDIS_URL: env.REDIS_URL ?? (backend === 'redis' ? DEFAULT_REDIS_URL : undefined),
  };
}

/** Thrown when the environment is invalid; the message names every bad variable. */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  constructor(readonly problems: readonly string[]) {
    super(`Invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
  }
}

/**
 * Variables opspad no longer reads, and what replaced them. Setting one stops start-up: ignoring
 * it would quietly change what the operator asked for (an allow list that no longer restricts).
 */
const REMOVED_VARIABLES: Readonly<Record<string, string>> = {
  OPSPAD_WEBHOOK_SECRET:
    'was removed: webhooks are signed with a secret per organization (opspad webhooks secret --org <name>); unset it',
  OPSPAD_WEBHOOK_ALLOWED_HOSTS:
    'was removed: the webhook handler may call any public address and refuses private ones; list exceptions in OPSPAD_WEBHOOK_ALLOW and unset it',
};

/** Parses the environment (by default `process.env`) into a {@link Config}. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  // An empty variable means "not set", as in most shells' `FOO= cmd`.
  const present = Object.fromEntries(Object.entries(env).filter(([, value]) => value !== ''));
  const removed = Object.keys(REMOVED_VARIABLES)
    .filter((name) => present[name] !== undefined)
    .map((name) => `${name}: ${REMOVED_VARIABLES[name]}`);
  const parsed = EnvSchema.safeParse(present);
  if (parsed.success && removed.length === 0) {
    return withQueueBackend(parsed.data);
  }
  throw new ConfigError([
    ...removed,
    ...(parsed.error?.issues ?? []).map((issue) => {
      const name = issue.path.join('.');
      const value = env[name];
      // URLs and secrets may carry credentials: never echo them back.
      const secret = /URL|PASSWORD|SECRET|KEY/.test(name);
      const shown = value === undefined || secret ? '' : ` (got ${JSON.stringify(value)})`;
      return `${name}: ${issue.message}${shown}`;
    }),
  ]);
}
