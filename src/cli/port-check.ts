/**
 * The addresses `opspad start` will listen on, tried before anything else opens: a port in use
 * is then refused at once, not after the database was opened and migrated. The service binds
 * them again later, so another process may still take one in between; that failure is said the
 * same way ({@link listenProblem}).
 */
import { createServer } from 'node:net';
import { ProblemError } from './failure.ts';

export interface ListenSetting {
  host: string;
  port: number;
  /** The variables that set them. */
  hostVariable: 'HOST' | 'OPSPAD_METRICS_HOST';
  portVariable: 'PORT' | 'OPSPAD_METRICS_PORT';
}

/** Why `setting` cannot be listened on, when `error` is one of the reasons a listen fails. */
export function listenProblem(error: unknown, setting: ListenSetting): ProblemError | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  const { host, port, hostVariable, portVariable } = setting;
  switch (code) {
    case 'EADDRINUSE':
      return new ProblemError(
        `${portVariable} ${port} on ${host} is in use by another process`,
        `Stop that process, or set ${portVariable} to a free port`,
        { cause: error },
      );
    case 'EACCES':
      return new ProblemError(
        `${portVariable} ${port} needs privileges this process does not have`,
        `Set ${portVariable} to a port above 1023`,
        { cause: error },
      );
    case 'EADDRNOTAVAIL':
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return new ProblemError(
        `${hostVariable} ${host} is not an address of this machine (${String(code)})`,
        `Set ${hostVariable} to one of its addresses: 127.0.0.1 for this machine only, 0.0.0.0 for every network`,
        { cause: error },
      );
  }
  return undefined;
}

/** Throws a {@link ProblemError} when the address cannot be listened on now; port 0 (any free port) always can. */
export async function assertCanListen(setting: ListenSetting): Promise<void> {
  if (setting.port === 0) {
    return;
  }
  const probe = createServer();
  try {
    await new Promise<void>((resolve, reject) => {
      probe.once('error', reject);
      probe.listen({ host: setting.host, port: setting.port, exclusive: true }, resolve);
    });
  } catch (error) {
    throw listenProblem(error, setting) ?? error;
  } finally {
    if (probe.listening) {
      await new Promise<void>((resolve) => probe.close(() => resolve()));
    }
  }
}

/** The addresses a service started with `config` listens on: the API's (role `all`) and the metrics port. */
export async function assertCanServe(
  config: { HOST?: string; PORT?: number; OPSPAD_METRICS_HOST: string; OPSPAD_METRICS_PORT?: number },
  role: 'all' | 'worker',
): Promise<void> {
  if (role === 'all' && config.HOST !== undefined && config.PORT !== undefined) {
    await assertCanListen({ host: config.HOST, port: config.PORT, hostVariable: 'HOST', portVariable: 'PORT' });
  }
  if (config.OPSPAD_METRICS_PORT !== undefined) {
    await assertCanListen({
      host: config.OPSPAD_METRICS_HOST,
      port: config.OPSPAD_METRICS_PORT,
      hostVariable: 'OPSPAD_METRICS_HOST',
      portVariable: 'OPSPAD_METRICS_PORT',
    });
  }
}
