/**
 * Which settings each `opspad` command reads: the parts (src/config/settings-parts.ts) it
 * uses, and no others. A variable a command never reads cannot stop it — `opspad mcp` runs whatever
 * OPSPAD_ADMIN_PASSWORD holds, while `opspad start`, which serves Bull Board, refuses a short one.
 */
import {
  API_PARTS,
  loadSettings,
  METRICS_ACCESS_PARTS,
  SERVICE_PARTS,
  type Settings,
  type SettingsPartName,
} from '../config/env.ts';

export const COMMAND_SETTINGS = {
  /** The API, the operator surfaces and the workers. */
  start: [...SERVICE_PARTS, ...API_PARTS],
  /** Workers only: no HTTP, no operator surface. */
  worker: SERVICE_PARTS,
  migrate: ['database', 'queue'],
  keys: ['database'],
  oauth: ['database'],
  webhooks: ['database', 'webhookSecrets'],
  orgs: ['database', 'limits'],
  /** Beside a running service; `start`'s settings too when it starts one itself. */
  demo: ['process', 'address', 'client', 'database', 'limits'],
  'ops watch': ['address', 'client'],
  'ops export': ['address', 'client'],
  mcp: ['address', 'client'],
  /** Through a running server's admin API, signed in as the operator. */
  'ops pause': ['address', 'client', 'admin'],
  'ops resume': ['address', 'client', 'admin'],
  'ops cancel': ['address', 'client', 'admin'],
  'ops retry-failed': ['address', 'client', 'admin'],
} as const satisfies Record<string, readonly SettingsPartName[]>;

export type SettingsCommand = keyof typeof COMMAND_SETTINGS;
export type CommandSettings<C extends SettingsCommand> = Settings<(typeof COMMAND_SETTINGS)[C][number]>;

/** Parses the settings `command` reads from the environment; throws a ConfigError naming each bad one. */
export function settingsFor<C extends SettingsCommand>(command: C, env: NodeJS.ProcessEnv = process.env) {
  // A worker with a metrics port serves /metrics behind the operator sign-in: it reads those too.
  const names: readonly SettingsPartName[] =
    command === 'worker' && env.OPSPAD_METRICS_PORT
      ? [...COMMAND_SETTINGS.worker, ...METRICS_ACCESS_PARTS]
      : COMMAND_SETTINGS[command];
  return loadSettings(names, env) as CommandSettings<C>;
}
