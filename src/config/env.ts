/**
 * Every environment variable opspad reads, parsed once with zod. Nothing else in the codebase
 * reads `process.env`: the parsed {@link Config} is passed down explicitly.
 */
import { z } from 'zod';

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

export const EnvSchema = z.object({
  PORT: port.default(3000),
  HOST: z.string().trim().min(1).default('127.0.0.1'),
  /** Unset: an embedded PGlite database under OPSPAD_DATA_DIR. */
  DATABASE_URL: url(['postgres:', 'postgresql:']).optional(),
  OPSPAD_DATA_DIR: z.string().trim().min(1).default('./.opspad'),
  REDIS_URL: url(['redis:', 'rediss:']).default('redis://127.0.0.1:6379'),
  OPSPAD_QUEUE_PREFIX: z
    .string()
    .regex(/^[A-Za-z0-9_.-]{1,64}$/, 'use 1 to 64 letters, digits, dot, dash or underscore')
    .default('opspad'),
  OPSPAD_MAX_ITEMS: positiveInt.default(1_000_000),
  /** Large enough for 1,000,000 UUID-sized ids in one create. */
  OPSPAD_MAX_BODY_BYTES: positiveInt.default(64 * 1024 * 1024),
  OPSPAD_LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  OPSPAD_PG_POOL_SIZE: positiveInt.default(10),
});

export type Config = z.infer<typeof EnvSchema>;

/** Thrown when the environment is invalid; the message names every bad variable. */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  constructor(readonly problems: readonly string[]) {
    super(`Invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
  }
}

/** Parses the environment (by default `process.env`) into a {@link Config}. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  // An empty variable means "not set", as in most shells' `FOO= cmd`.
  const present = Object.fromEntries(Object.entries(env).filter(([, value]) => value !== ''));
  const parsed = EnvSchema.safeParse(present);
  if (parsed.success) {
    return parsed.data;
  }
  throw new ConfigError(
    parsed.error.issues.map((issue) => {
      const name = issue.path.join('.');
      const value = env[name];
      // URLs and secrets may carry credentials: never echo them back.
      const secret = /URL|PASSWORD|SECRET|KEY/.test(name);
      const shown = value === undefined || secret ? '' : ` (got ${JSON.stringify(value)})`;
      return `${name}: ${issue.message}${shown}`;
    }),
  );
}
