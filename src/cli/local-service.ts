/**
 * opspad running inside this `opspad` process (`start`, `worker`, and `demo` when no service is
 * running): the database opened here, the control socket beside an embedded one, and the list
 * of shutdown steps that closes all of it in order.
 */
import { BOARD_PATH } from '../api/board.ts';
import type { DatabaseSettings } from '../config/env.ts';
import { loadHandlerModules } from '../handlers/registry.ts';
import type { Logger } from '../logger.ts';
import { createOpspad, type Opspad, type ServiceConfig } from '../main.ts';
import { assertRedisReachable } from '../queue/connection.ts';
import { redisTargetOf } from '../queue/redis-target.ts';
import type { ShutdownStep } from '../shutdown.ts';
import { startSequence } from '../start-steps.ts';
import {
  makePrivate,
  type OpspadDatabase,
  openConnectedDatabase,
  openFolderMode,
  runMigrations,
} from '../store/index.ts';
import { databaseOpenProblem, migrationProblem } from './database-problem.ts';
import { CommandError, EXIT_CODES } from './failure.ts';
import { ensureEmbeddedDatabaseFree, listenLocalControl } from './local-control.ts';
import { assertCanServe } from './port-check.ts';

/** Opens the configured database, refusing an embedded one another process holds. */
export async function openDatabaseFree(config: DatabaseSettings): Promise<OpspadDatabase> {
  if (!config.DATABASE_URL) {
    await ensureEmbeddedDatabaseFree(config.OPSPAD_DATA_DIR);
  }
  return openConnectedDatabase(config).catch((error: unknown) => {
    throw databaseOpenProblem(error, config);
  });
}

/** Applies the migrations; a failure says which user or server and what to do. */
function migrate(db: OpspadDatabase, config: DatabaseSettings): Promise<void> {
  return runMigrations(db).catch((error: unknown) => {
    throw migrationProblem(error, config);
  });
}

/** Opens the configured database and applies the migrations (`opspad keys`, `migrate`, …). */
export async function openForCommand(config: DatabaseSettings): Promise<OpspadDatabase> {
  const db = await openDatabaseFree(config);
  try {
    await migrate(db, config);
    return db;
  } catch (error) {
    await db.close();
    throw error;
  }
}

/**
 * The steps of startLocal in start order, each with its place in the shutdown that follows
 * opspad's own (null: nothing to stop); what each closes is declared at the step.
 */
const LOCAL_STEPS = {
  Redis: null,
  handlers: null,
  database: 2,
  migrations: null,
  'control socket': 1,
  service: null,
} as const satisfies Record<string, number | null>;
type LocalStep = keyof typeof LOCAL_STEPS;

export interface LocalService {
  opspad: Opspad;
  db: OpspadDatabase;
  /** opspad's own shutdown steps, then the control socket and the database. */
  shutdownSteps: readonly ShutdownStep[];
}

/**
 * The embedded database's folder, before it is opened: what this process writes from now on is
 * its user's alone (umask 077), and a folder others may enter is refused unless `allowOpen`,
 * since what it holds (webhook secrets, every organization's data) may have been read.
 */
function guardDataFolder(dataDir: string, logger: Logger, allowOpen: boolean): void {
  process.umask(0o077);
  const mode = openFolderMode(dataDir);
  if (mode === null) {
    return;
  }
  const problem = `the data folder ${dataDir} (OPSPAD_DATA_DIR) can be read by other users: its mode is ${mode}`;
  if (!allowOpen) {
    throw new CommandError(
      problem,
      `Run \`chmod -R go-rwx ${dataDir}\` and rotate the webhook secrets it holds (opspad webhooks secret --rotate), or start with --allow-open-data-dir, which makes it private and goes on`,
      { exitCode: EXIT_CODES.usage },
    );
  }
  logger.warn({ dataDir, mode }, `${problem}; made private (0700, files 0600) because of --allow-open-data-dir`);
}

/**
 * Starts opspad in this process (API and workers, or workers only). A step that fails closes
 * what the earlier ones opened and rejects with a StartFailedError naming it.
 */
export async function startLocal(
  config: ServiceConfig,
  logger: Logger,
  role: 'all' | 'worker',
  { allowOpenDataDir = false }: { allowOpenDataDir?: boolean } = {},
): Promise<LocalService> {
  if (role === 'worker' && !config.DATABASE_URL) {
    throw new CommandError(
      'DATABASE_URL is not set, and workers in processes of their own share one Postgres server',
      'Set DATABASE_URL to that server, or run `opspad start`, whose workers share its embedded database',
      { exitCode: EXIT_CODES.usage },
    );
  }
  // Before anything opens: a port in use is said at once, not after migrating.
  await assertCanServe(config, role);
  if (!config.DATABASE_URL) {
    guardDataFolder(config.OPSPAD_DATA_DIR, logger, allowOpenDataDir);
  }
  const start = startSequence<LocalStep>({
    logger,
    timeoutMs: config.OPSPAD_SHUTDOWN_TIMEOUT,
    stopOrder: LOCAL_STEPS,
  });
  // Before the database: a missing Redis is the most common first-run problem; say so at once.
  if (config.OPSPAD_QUEUE_BACKEND === 'redis') {
    await start.step('Redis', () => assertRedisReachable(redisTargetOf(config)));
  }
  // Before the database too: a handler module that fails to load needs no migration to say so.
  const handlerModules = await start.step('handlers', () => loadHandlerModules(config.OPSPAD_HANDLERS));
  const db = await start.step('database', () => openDatabaseFree(config), {
    shutdown: (opened) => ({ run: () => opened.close() }),
  });
  await start.step('migrations', () => migrate(db, config));
  if (!config.DATABASE_URL) {
    // PGlite wrote its files 0666, whatever the umask: the migrations' too.
    makePrivate(config.OPSPAD_DATA_DIR);
    await start.step('control socket', () => listenLocalControl(config.OPSPAD_DATA_DIR, db), {
      shutdown: (server) => ({
        run: () => new Promise<void>((resolve) => server.close(() => resolve())),
        force: () => server.closeAllConnections(),
      }),
    });
  }
  // Its own steps name themselves when one fails; this one then closes the above.
  const opspad = await start.step('service', () =>
    createOpspad({ config, logger, db, handlerModules, api: role === 'all' }),
  );
  if (!config.DATABASE_URL) {
    logger.info(
      { dataDir: config.OPSPAD_DATA_DIR },
      'using the embedded PGlite database (set DATABASE_URL for Postgres)',
    );
  }
  return {
    opspad,
    db,
    shutdownSteps: [...opspad.shutdownSteps, ...start.shutdownSteps()],
  };
}

function passwordShown(opspad: Opspad): string {
  return opspad.adminPasswordGenerated
    ? `${opspad.admin.password} (generated for this run; set OPSPAD_ADMIN_PASSWORD to choose one)`
    : '(OPSPAD_ADMIN_PASSWORD)';
}

/** Where Bull Board is and how to sign in. */
export function boardLine(opspad: Opspad): string {
  return `Bull Board: ${opspad.url}${BOARD_PATH}  user: ${opspad.admin.user}  password: ${passwordShown(opspad)}`;
}

/** Where a worker's metrics are and how to sign in (the same operator credentials). */
export function metricsLine(opspad: Opspad): string {
  return `Metrics: ${opspad.metricsUrl}/metrics  user: ${opspad.admin.user}  password: ${passwordShown(opspad)}`;
}
