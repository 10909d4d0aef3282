/**
 * The `opspad` command. Parses the environment once, then runs one subcommand.
 */
import { parseArgs } from 'node:util';
import { type Config, ConfigError, loadConfig } from '../config/env.ts';
import { createLogger, type Logger } from '../logger.ts';
import { startService } from '../main.ts';
import { createApiKey, type OpspadDatabase, openDatabase, runMigrations } from '../store/index.ts';
import { createKeyViaLocalControl, ensureEmbeddedDatabaseFree, listenLocalControl } from './local-control.ts';

const USAGE = `Usage: opspad <command> [options]

Commands:
  start                          Start the HTTP API (port PORT, default 3000).
  migrate                        Apply database migrations, then exit.
  keys create --org <name>       Create an API key for an organization (created when new).
                [--json]         Print {"organization_id", "api_key"} as JSON.
  help                           Show this help.

Configuration comes from the environment: DATABASE_URL (unset: embedded PGlite under
OPSPAD_DATA_DIR, default ./.opspad), PORT, HOST, REDIS_URL, OPSPAD_QUEUE_PREFIX,
OPSPAD_MAX_ITEMS, OPSPAD_MAX_BODY_BYTES, OPSPAD_LOG_LEVEL. See README.md.`;

class UsageError extends Error {
  override readonly name = 'UsageError';
}

/** Opens the configured database, refusing an embedded one another process holds. */
async function openForCommand(config: Config): Promise<OpspadDatabase> {
  if (!config.DATABASE_URL) {
    await ensureEmbeddedDatabaseFree(config.OPSPAD_DATA_DIR);
  }
  const db = await openDatabase(config);
  await runMigrations(db);
  return db;
}

async function start(config: Config, logger: Logger): Promise<void> {
  const db = await openForCommand(config);
  const control = config.DATABASE_URL ? null : await listenLocalControl(config.OPSPAD_DATA_DIR, db);
  const service = await startService({ config, logger, db });
  if (!config.DATABASE_URL) {
    logger.info(
      { dataDir: config.OPSPAD_DATA_DIR },
      'using the embedded PGlite database (set DATABASE_URL for Postgres)',
    );
  }
  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) {
      logger.warn({ signal }, 'second signal: exiting now');
      process.exit(1);
    }
    stopping = true;
    logger.info({ signal }, 'shutting down');
    const hardStop = setTimeout(() => {
      logger.error('shutdown took too long: exiting');
      process.exit(1);
    }, 15_000);
    hardStop.unref();
    await service.close();
    await new Promise<void>((resolve) => (control ? control.close(() => resolve()) : resolve()));
    await db.close().catch((error: unknown) => logger.error({ err: error }, 'closing the database failed'));
    logger.info('stopped');
    process.exit(0);
  };
  process.on('SIGINT', () => void shutdown('SIGINT'));
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
}

async function keysCreate(config: Config, args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: { org: { type: 'string' }, json: { type: 'boolean', default: false } },
    strict: true,
  });
  const org = values.org?.trim();
  if (!org) {
    throw new UsageError('keys create needs --org <name>, e.g. opspad keys create --org acme --json');
  }
  let created = config.DATABASE_URL ? null : await createKeyViaLocalControl(config.OPSPAD_DATA_DIR, org);
  if (!created) {
    const db = await openForCommand(config);
    try {
      created = await createApiKey(db, org);
    } finally {
      await db.close();
    }
  }
  if (values.json) {
    process.stdout.write(`${JSON.stringify({ organization_id: created.organization_id, api_key: created.api_key })}\n`);
  } else {
    process.stdout.write(
      `Organization: ${created.organization_id}\nAPI key:      ${created.api_key}\nKeep the key: it is shown only now.\n`,
    );
  }
}

export async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (command === undefined || command === 'help' || command === '--help' || command === '-h') {
    process.stdout.write(`${USAGE}\n`);
    return command === undefined ? 2 : 0;
  }
  let config: Config;
  try {
    config = loadConfig();
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`${error.message}\n`);
      return 2;
    }
    throw error;
  }
  const logger = createLogger(config.OPSPAD_LOG_LEVEL);
  try {
    switch (command) {
      case 'start':
        await start(config, logger);
        return -1; // keeps running until a signal
      case 'migrate': {
        const db = await openForCommand(config);
        await db.close();
        process.stdout.write(`Migrations applied (${db.engine}).\n`);
        return 0;
      }
      case 'keys':
        if (rest[0] !== 'create') {
          throw new UsageError(`Unknown keys command "${rest[0] ?? ''}". Use: opspad keys create --org <name>`);
        }
        await keysCreate(config, rest.slice(1));
        return 0;
      default:
        throw new UsageError(`Unknown command "${command}".\n\n${USAGE}`);
    }
  } catch (error) {
    if (error instanceof UsageError || (error as { code?: string }).code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') {
      process.stderr.write(`${(error as Error).message}\n`);
      return 2;
    }
    process.stderr.write(`opspad ${command}: ${error instanceof Error ? error.message : String(error)}\n`);
    return 1;
  }
}
