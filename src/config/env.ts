/**
 * Every environment variable opspad reads, parsed with zod. Nothing else in the codebase reads
 * `process.env`: the parsed settings are passed down explicitly.
 *
 * The variables come in parts (src/config/settings-parts.ts: the database, the queue, the HTTP
 * API, the operator surfaces, the workers…), and each `opspad` command parses only the parts it
 * uses (src/cli/settings.ts): a setting a command never reads cannot stop it. `loadConfig` parses
 * them all, as a process that serves everything needs.
 */
import { z } from 'zod';
import { ConfigError } from './config-error.ts';
import { DEFAULT_REDIS_URL, type QueueBackendKind, SETTINGS_PARTS, type SettingsPart } from './settings-parts.ts';

export type { QueueBackendKind };
export { ConfigError };

export type SettingsPartName = keyof typeof SETTINGS_PARTS;

type Parsed<Name extends SettingsPartName> = z.output<(typeof SETTINGS_PARTS)[Name]['schema']>;
type Intersection<Union> = (Union extends unknown ? (value: Union) => void : never) extends (value: infer Both) => void
  ? Both
  : never;
/** The queue part, with the backend decided (see {@link decideQueueBackend}). */
type Decided<Settings> = Settings extends { OPSPAD_QUEUE_PREFIX: string }
  ? Omit<Settings, 'OPSPAD_QUEUE_BACKEND'> & { OPSPAD_QUEUE_BACKEND: QueueBackendKind }
  : Settings;

/** The settings of the parts named. */
export type Settings<Name extends SettingsPartName> = Decided<Intersection<{ [N in Name]: Parsed<N> }[Name]>>;

export type ProcessSettings = Settings<'process'>;
export type AddressSettings = Settings<'address'>;
export type DatabaseSettings = Settings<'database'>;
export type QueueSettings = Settings<'queue'>;
export type ApiSettings = Settings<'address' | 'api' | 'hostedMcp' | 'signIn' | 'admin'>;
/** What a metrics port needs besides the telemetry part: who may sign in, and with what. */
export type MetricsAccessSettings = Settings<'signIn' | 'admin'>;
export type ClientSettings = Settings<'address' | 'client'>;

/** What any process running opspad reads, whether it serves the API or only runs workers. */
export const SERVICE_PARTS = [
  'process',
  'database',
  'queue',
  'limits',
  'handlers',
  'workers',
  'reorganizer',
  'telemetry',
  'retention',
] as const;
/** What serving the HTTP API and the operator surfaces adds. */
export const API_PARTS = ['address', 'api', 'hostedMcp', 'signIn', 'admin'] as const;
/** What a metrics port (OPSPAD_METRICS_PORT) adds to a process that does not serve the API. */
export const METRICS_ACCESS_PARTS = ['signIn', 'admin'] as const;

/** Every part: a service's, and what client commands and `opspad webhooks secret` read. */
export const ALL_PARTS = Object.keys(SETTINGS_PARTS) as SettingsPartName[];
export type Config = Settings<SettingsPartName>;

/**
 * The queue backend decided: the one named, else Redis when REDIS_URL is set (as before it
 * became optional), else Postgres, which needs nothing more.
 */
function decideQueueBackend(env: Record<string, unknown>): Record<string, unknown> {
  if (!('OPSPAD_QUEUE_PREFIX' in env)) {
    return env; // the queue part was not read
  }
  const backend = env.OPSPAD_QUEUE_BACKEND ?? (env.REDIS_URL || env.REDIS_CLUSTER_NODES ? 'redis' : 'postgres');
  return {
    ...env,
    OPSPAD_QUEUE_BACKEND: backend,
    REDIS_URL: env.REDIS_URL ?? (backend === 'redis' && !env.REDIS_CLUSTER_NODES ? DEFAULT_REDIS_URL : undefined),
  };
}

/**
 * Parses the variables of the parts named from `env` (by default `process.env`); the others are
 * not read at all. Throws a {@link ConfigError} naming every bad variable.
 */
export function loadSettings<const Name extends SettingsPartName>(
  names: readonly Name[],
  env: NodeJS.ProcessEnv = process.env,
): Settings<Name> {
  // An empty variable means "not set", as in most shells' `FOO= cmd`.
  const present = Object.fromEntries(Object.entries(env).filter(([, value]) => value !== ''));
  const parts = names.map((name) => SETTINGS_PARTS[name] as SettingsPart);
  const removedVariables: Record<string, string> = Object.assign({}, ...parts.map((p) => p.removed ?? {}));
  // Variables that may not be set (any more, or together), whatever their values.
  const refused = Object.keys(removedVariables)
    .filter((name) => present[name] !== undefined)
    .map((name) => `${name}: ${removedVariables[name]}`);
  if (
    names.includes('database' as Name) &&
    present.DATABASE_DIRECT_URL !== undefined &&
    present.DATABASE_URL === undefined
  ) {
    refused.push(
      'DATABASE_DIRECT_URL: goes with DATABASE_URL (the pooler it bypasses); set DATABASE_URL too, or unset it to use the embedded database',
    );
  }
  if (names.includes('queue' as Name) && present.REDIS_URL !== undefined && present.REDIS_CLUSTER_NODES !== undefined) {
    refused.push(
      'REDIS_URL, REDIS_CLUSTER_NODES: set one of them: REDIS_URL for one Redis, REDIS_CLUSTER_NODES for a Redis Cluster',
    );
  }
  const schema = z.object(Object.assign({}, ...parts.map((p) => p.schema.shape)) as z.ZodRawShape);
  const parsed = schema.safeParse(present);
  if (parsed.success && refused.length === 0) {
    return decideQueueBackend(parsed.data) as Settings<Name>;
  }
  throw new ConfigError([
    ...refused,
    ...(parsed.error?.issues ?? []).map((issue) => {
      const name = issue.path.join('.');
      const value = env[name];
      // URLs and secrets may carry credentials: never echo them back.
      const secret = /URL|NODES|PASSWORD|SECRET|KEY|HEADERS|ENDPOINT/.test(name);
      const shown = value === undefined || secret ? '' : ` (got ${JSON.stringify(value)})`;
      return `${name}: ${issue.message}${shown}`;
    }),
  ]);
}

/** Parses every variable opspad reads (by default from `process.env`) into a {@link Config}. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  return loadSettings(ALL_PARTS, env);
}
