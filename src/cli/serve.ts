/**
 * `opspad start` and `opspad worker`: opspad in this process until SIGINT or SIGTERM, then a
 * shutdown within OPSPAD_SHUTDOWN_TIMEOUT (src/cli/process-exit.ts).
 */
import { writeStderr } from '../log-sink.ts';
import { createLogger } from '../logger.ts';
import { assertCanServe } from './port-check.ts';
import { exitOnSignals } from './process-exit.ts';
import { settingsFor } from './settings.ts';

/** Starts the service; -1: the process keeps running until a signal ends it. */
export async function serve(role: 'all' | 'worker', { allowOpenDataDir = false } = {}): Promise<number> {
  const config = settingsFor(role === 'all' ? 'start' : 'worker');
  // The settings and the ports, before loading the service (seconds on a busy machine): a port
  // in use is said at once. startLocal checks them again, for every way in.
  await assertCanServe(config, role);
  const { boardLine, metricsLine, startLocal } = await import('./local-service.ts');
  const logger = createLogger(config.OPSPAD_LOG_LEVEL);
  const signals = exitOnSignals({
    command: `opspad ${role === 'all' ? 'start' : 'worker'}`,
    logger,
    timeoutMs: config.OPSPAD_SHUTDOWN_TIMEOUT,
  });
  const service = await startLocal(config, logger, role, { allowOpenDataDir });
  if (service.opspad.url) {
    writeStderr(`\n${boardLine(service.opspad)}\n`);
  } else if (service.opspad.metricsUrl) {
    writeStderr(`\n${metricsLine(service.opspad)}\n`);
  }
  signals.started(service.shutdownSteps);
  return -1;
}
