/**
 * The composition root: builds every dependency from the configuration, starts the HTTP
 * service, and tears it all down in order on shutdown.
 */
import { once } from 'node:events';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createApp } from './api/create-app.ts';
import type { Config } from './config/env.ts';
import type { Logger } from './logger.ts';
import { type OpspadDatabase, openDatabase, runMigrations } from './store/index.ts';
import { createToolRegistry } from './tools/registry.ts';

export interface RunningService {
  /** Base URL the HTTP server listens on. */
  url: string;
  db: OpspadDatabase;
  /** Stops accepting requests, lets in-flight ones finish, then closes the database. */
  close(): Promise<void>;
}

export interface StartOptions {
  config: Config;
  logger: Logger;
  /** An already-open database (tests share one); otherwise opened from the config. */
  db?: OpspadDatabase;
}

/** Hard limit on shutdown: a stuck connection must not keep the process alive forever. */
const SHUTDOWN_TIMEOUT_MS = 10_000;

export async function startService({ config, logger, db: givenDb }: StartOptions): Promise<RunningService> {
  const db = givenDb ?? (await openDatabase(config));
  if (!givenDb) {
    await runMigrations(db);
  }
  const tools = createToolRegistry({
    db,
    maxItems: config.OPSPAD_MAX_ITEMS,
    hasHandler: () => false,
  });
  let accepting = true;
  const app = createApp({
    db,
    tools,
    logger,
    maxBodyBytes: config.OPSPAD_MAX_BODY_BYTES,
    readiness: {
      checks: { postgres: async () => void (await db.query('SELECT 1')) },
      accepting: () => accepting,
    },
  });
  const server: Server = app.listen(config.PORT, config.HOST);
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  const url = `http://${config.HOST.includes(':') ? `[${config.HOST}]` : config.HOST}:${port}`;
  logger.info({ url, database: db.engine }, 'opspad is listening');

  let closing: Promise<void> | undefined;
  const close = () => {
    closing ??= (async () => {
      accepting = false;
      const steps: [string, () => Promise<unknown>][] = [
        ['http server', () => new Promise<void>((resolve) => server.close(() => resolve()))],
        ['database', () => (givenDb ? Promise.resolve() : db.close())],
      ];
      const timeout = setTimeout(() => server.closeAllConnections(), SHUTDOWN_TIMEOUT_MS);
      server.closeIdleConnections();
      for (const [name, step] of steps) {
        try {
          await step();
        } catch (error) {
          logger.error({ err: error }, `closing the ${name} failed`);
        }
      }
      clearTimeout(timeout);
    })();
    return closing;
  };
  return { url, db, close };
}
