/**
 * What went wrong opening or migrating the database, said the `opspad` way: which server (host
 * and port, never the user's password), which variable points at it, and what to check. The
 * driver's own words ("connect ECONNREFUSED 127.0.0.1:1") name neither the variable nor a fix.
 */
import type { DatabaseSettings } from '../config/env.ts';
import { parsePostgresUrl } from '../config/postgres-url.ts';
import { describeFailure } from '../start-steps.ts';
import { CommandError, ProblemError } from './failure.ts';

interface Coded {
  code?: unknown;
  address?: unknown;
  port?: unknown;
  message?: unknown;
}

/** The error and what it wraps: its causes, and an AggregateError's errors (IPv4 and IPv6 tried). */
function chain(error: unknown): Coded[] {
  const found: Coded[] = [];
  const queue: unknown[] = [error];
  while (queue.length > 0 && found.length < 10) {
    const next = queue.shift();
    if (typeof next !== 'object' || next === null) {
      continue;
    }
    found.push(next as Coded);
    queue.push((next as { cause?: unknown }).cause, ...((next as { errors?: unknown[] }).errors ?? []));
  }
  return found;
}

/** The first error of the chain whose code is one of `codes`. */
function withCode(error: unknown, codes: readonly string[]): Coded | undefined {
  return chain(error).find((e) => typeof e.code === 'string' && codes.includes(e.code));
}

interface Server {
  variable: 'DATABASE_URL' | 'DATABASE_DIRECT_URL';
  host: string;
  port: string;
  database: string;
}

function serverOf(variable: Server['variable'], given: string): Server {
  // A multi-host URL is named by its first host (the others are listed in the driver's words).
  const url = (() => {
    try {
      return parsePostgresUrl(given).singleHostUrl;
    } catch {
      return given;
    }
  })();
  try {
    const parsed = new URL(url);
    const socket = parsed.searchParams.get('host');
    return {
      variable,
      host: parsed.hostname || socket || 'localhost',
      port: parsed.port || '5432',
      database: decodeURIComponent(parsed.pathname.slice(1)) || 'postgres',
    };
  } catch {
    return { variable, host: 'localhost', port: '5432', database: 'postgres' };
  }
}

/** The server the failure came from: DATABASE_DIRECT_URL's when the address is its own. */
function serverAt(error: unknown, config: DatabaseSettings): Server {
  const main = serverOf('DATABASE_URL', config.DATABASE_URL ?? '');
  if (!config.DATABASE_DIRECT_URL) {
    return main;
  }
  const direct = serverOf('DATABASE_DIRECT_URL', config.DATABASE_DIRECT_URL);
  const at = chain(error).find((e) => e.address !== undefined);
  const address = at ? `${String(at.address)}:${String(at.port)}` : '';
  return address === `${direct.host}:${direct.port}` && address !== `${main.host}:${main.port}` ? direct : main;
}

/** The server's own words (the message of the error with a SQLSTATE), for what only it can say. */
function serverSaid(error: unknown): string {
  const fromServer = chain(error).find((e) => typeof e.code === 'string' && /^[0-9A-Z]{5}$/.test(e.code));
  return typeof fromServer?.message === 'string' ? fromServer.message : describeFailure(error);
}

/** A failure to open the database, said with the variable at fault and what to check. */
export function databaseOpenProblem(error: unknown, config: DatabaseSettings): Error {
  if (error instanceof ProblemError) {
    return error;
  }
  if (!config.DATABASE_URL) {
    return new CommandError(
      `the embedded database in ${config.OPSPAD_DATA_DIR} (OPSPAD_DATA_DIR) could not be opened: ${describeFailure(error)}`,
      'Check that opspad may read and write that folder, or set OPSPAD_DATA_DIR to another one',
      { cause: error },
    );
  }
  return connectionProblem(error, serverAt(error, config)) ?? otherProblem(error, serverAt(error, config));
}

/** A failure to migrate: the connection's problems as when opening, and a user who may not create tables. */
export function migrationProblem(error: unknown, config: DatabaseSettings): unknown {
  if (!config.DATABASE_URL || error instanceof ProblemError) {
    return error;
  }
  const server = serverAt(error, config);
  if (withCode(error, ['42501'])) {
    return new CommandError(
      `the user in ${server.variable} may not create opspad's tables in database "${server.database}" (${serverSaid(error)})`,
      `Make it the database's owner (\`ALTER DATABASE "${server.database}" OWNER TO <that user>\`), or put a user who owns the database in ${server.variable}`,
      { cause: error },
    );
  }
  return connectionProblem(error, server) ?? error;
}

function connectionProblem(error: unknown, server: Server): CommandError | undefined {
  const { variable } = server;
  const where = `Postgres at ${server.host}:${server.port} (${variable})`;
  const problem = (what: string, remedy: string) => new CommandError(what, remedy, { cause: error });
  const network = withCode(error, [
    'ECONNREFUSED',
    'ENOTFOUND',
    'EAI_AGAIN',
    'ETIMEDOUT',
    'EHOSTUNREACH',
    'ENETUNREACH',
  ]);
  switch (network?.code) {
    case 'ECONNREFUSED':
      return problem(
        `${where} refused the connection`,
        `Check that Postgres runs there and that ${variable} names its host and port, or unset DATABASE_URL to use the embedded database`,
      );
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return problem(
        `the host "${server.host}" of ${variable} is not known here (${network.code})`,
        `Check the host name in ${variable}`,
      );
    case 'ETIMEDOUT':
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
      return problem(
        `${where} could not be reached (${network.code})`,
        `Check that this machine can reach ${server.host} on port ${server.port} (address, firewall) and that ${variable} names them`,
      );
  }
  const refused = withCode(error, ['28P01', '28000', '3D000', '57P03', '53300']);
  switch (refused?.code) {
    case '28P01':
    case '28000':
      return problem(
        `${where} refused to let opspad sign in (${serverSaid(error)})`,
        `Check the user and password in ${variable}, and that the server's pg_hba.conf lets that user connect from here`,
      );
    case '3D000':
      return problem(
        `${where} has no database "${server.database}"`,
        `Create it (\`createdb ${server.database}\`), or set ${variable} to a database that exists`,
      );
    case '57P03':
      return problem(
        `${where} is starting up or shutting down`,
        'Wait until it accepts connections, then run it again',
      );
    case '53300':
      return problem(
        `${where} has no connection left for opspad (${serverSaid(error)})`,
        "Lower OPSPAD_PG_POOL_SIZE in the processes that share it, or raise the server's max_connections",
      );
  }
  if (/timeout/i.test(describeFailure(error))) {
    return problem(
      `${where} did not answer in time`,
      `Check that Postgres runs at ${server.host}:${server.port} and that this machine can reach it`,
    );
  }
  return undefined;
}

function otherProblem(error: unknown, server: Server): CommandError {
  return new CommandError(
    `Postgres at ${server.host}:${server.port} (${server.variable}) could not be used: ${describeFailure(error)}`,
    `Check that ${server.variable} names a Postgres server opspad can reach and sign in to`,
    { cause: error },
  );
}
