/**
 * opspad running inside this `opspad` process (`start`, `worker`, and `demo` when no service is
 * running): the database opened here, the control socket beside an embedded one, and the list
 * of shutdown steps that closes all of it in order.
 */
import { BOARD_PATH } from '../api/board.ts';
import type { Config } from '../config/env.ts';
import type { Logger } from '../logger.ts';
import { createOpspad, type Opspad } from '../main.ts';
import { assertRedisReachable } from '../queue/connection.ts';
import type { ShutdownStep } from '../shutdown.ts';
import { type OpspadDatabase, openDatabase, runMigrations } from '../store/index.ts';
import { ensureEmbeddedDatabaseFree, listenLocalControl } from './local-control.ts';
import { UsageError } from './usage-error.ts';

/** Opens the configured database, refusing an embedded one another process holds. */
export async function openForCommand(config: Config): Promise<OpspadDatabase> {
  if (!config.DATABASE_URL) {
    await ensureEmbeddedDatabaseFree(config.OPSPAD_DATA_DIR);
  }
  const db = await openDatabase(config);
  await runMigrations(db);
  return db;
}

export interface LocalService {
  opspad: Opspad;
  db: OpspadDatabase;
  /** opspad's own shutdown steps, then the control socket and the database. */
  shutdownSteps: readonly ShutdownStep[];
}

/** Starts opspad in this process (API and workers, or workers only). */
export async function startLocal(config: Config, logger: Logger, role: 'all' | 'worker'): Promise<LocalService> {
  if (role === 'worker' && !config.DATABASE_URL) {
    throw new UsageError(
      'opspad worker needs DATABASE_URL: workers in their own processes share one Postgres server. The embedded database serves a single process; use opspad start for that.',
    );
  }
  // Before the database: a missing Redis is the most common first-run problem; say so at once.
  if (config.OPSPAD_QUEUE_BACKEND === 'redis') {
    await assertRedisReachable(config.REDIS_URL as string);
  }
  const db = await openForCommand(config);
  const control = config.DATABASE_URL ? null : await listenLocalControl(config.OPSPAD_DATA_DIR, db);
  let opspad: Opspad;
  try {
    opspad = await createOpspad({ config, logger, db, api: role === 'all' });
  } catch (error) {
    control?.close();
    await db.close();
    throw error;
  }
  if (!config.DATABASE_URL) {
    logger.info(
      { dataDir: config.OPSPAD_DATA_DIR },
      'using the embedded PGlite database (set DATABASE_URL for Postgres)',
    );
  }
  return {
    opspad,
    db,
    shutdownSteps: [
      ...opspad.shutdownSteps,
      {
        name: 'control socket',
        run: () => new Promise<void>((resolve) => (control ? control.close(() => resolve()) : resolve())),
        force: () => control?.closeAllConnections(),
      },
      { name: 'database', run: () => db.close() },
    ],
  };
}

/** Where Bull Board is and how to sign in. */
export function boardLine(opspad: Opspad): string {
  const password = opspad.adminPasswordGenerated
    ? `${opspad.admin.password} (generated for this run; set OPSPAD_ADMIN_PASSWORD to choose one)`
    : '(OPSPAD_ADMIN_PASSWORD)';
  return `Bull Board: ${opspad.url}${BOARD_PATH}  user: ${opspad.admin.user}  password: ${password}`;
}
