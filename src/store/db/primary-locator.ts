/**
 * Connections to the writable node of a multi-host DATABASE_URL (src/config/postgres-url.ts).
 * node-postgres connects to one host; here its socket is one whose `connect` first asks which
 * host is the primary now — each host probed in order with `pg_is_in_recovery()` and
 * `transaction_read_only`, as libpq does for `target_session_attrs=read-write` — and then
 * connects there. Every pool, LISTEN connection and the Postgres queue backend's pool open their
 * sockets this way, so after a failover their new connections reach the new primary without a
 * restart. An answer is reused for a moment (a pool opening ten connections probes once) and
 * forgotten as soon as a connection fails.
 */
import { Socket } from 'node:net';
import pg from 'pg';
import {
  needsPrimaryLookup,
  type PostgresHost,
  type PostgresUrl,
  parsePostgresUrl,
} from '../../config/postgres-url.ts';

/** A host that does not answer within this is passed over for the next. */
const PROBE_TIMEOUT_MS = 3000;
/** How long a located primary is trusted without asking again. */
const FRESH_MS = 2000;
/** SQLSTATE sqlclient_unable_to_establish_sqlconnection: the call may be retried (pg-errors.ts). */
const NO_PRIMARY = '08001';

export interface PrimaryLocator {
  /** The host to connect to now. */
  locate(): Promise<PostgresHost>;
  /** Forgets the answer: the next connection asks again. */
  forget(): void;
}

function hostUrl(parsed: PostgresUrl, host: PostgresHost): string {
  const url = new URL(parsed.singleHostUrl);
  url.hostname = host.host.includes(':') ? `[${host.host}]` : host.host;
  url.port = String(host.port);
  return url.toString();
}

/** Whether `host` answers and, unless any node will do, takes writes; throws why not. */
async function probe(parsed: PostgresUrl, host: PostgresHost): Promise<void> {
  const client = new pg.Client({
    connectionString: hostUrl(parsed, host),
    connectionTimeoutMillis: PROBE_TIMEOUT_MS,
    application_name: 'opspad-probe',
  });
  client.on('error', () => {});
  try {
    await client.connect();
    if (parsed.targetSessionAttrs === 'any') {
      return;
    }
    const { rows } = await client.query<{ recovery: boolean; read_only: string }>(
      `SELECT pg_is_in_recovery() AS recovery, current_setting('transaction_read_only') AS read_only`,
    );
    if (rows[0]?.recovery || rows[0]?.read_only !== 'off') {
      throw new Error('a standby or read-only node');
    }
  } finally {
    await client.end().catch(() => {});
  }
}

export function primaryLocator(parsed: PostgresUrl): PrimaryLocator {
  let located: { host: PostgresHost; at: number } | undefined;
  let asking: Promise<PostgresHost> | undefined;

  const ask = async (): Promise<PostgresHost> => {
    const refusals: string[] = [];
    for (const host of parsed.hosts) {
      try {
        await probe(parsed, host);
        located = { host, at: Date.now() };
        return host;
      } catch (error) {
        refusals.push(`${host.host}:${host.port} ${error instanceof Error ? error.message : String(error)}`);
      }
    }
    throw Object.assign(
      new Error(`no ${parsed.targetSessionAttrs} server among the hosts of the database URL (${refusals.join('; ')})`),
      { code: NO_PRIMARY },
    );
  };

  return {
    locate() {
      if (located && Date.now() - located.at < FRESH_MS) {
        return Promise.resolve(located.host);
      }
      asking ??= ask().finally(() => {
        asking = undefined;
      });
      return asking;
    },
    forget() {
      located = undefined;
    },
  };
}

/** A socket that connects to where `locator` says, whatever host and port it is given. */
function locatingSocket(locator: PrimaryLocator): Socket {
  const socket = new Socket();
  const connect = socket.connect.bind(socket);
  socket.on('error', () => locator.forget());
  return Object.assign(socket, {
    connect() {
      locator.locate().then(
        (host) => connect(host.port, host.host),
        (error: unknown) => socket.destroy(error instanceof Error ? error : new Error(String(error))),
      );
      return socket;
    },
  });
}

/** What node-postgres (a pool, a client, BullMQ's connection) needs to reach the database at `url`. */
export interface PgConnectionConfig {
  connectionString: string;
  stream?: () => Socket;
}

/** A single-host URL passes as it is; a multi-host one connects through a {@link primaryLocator}. */
export function pgConnectionConfig(url: string): PgConnectionConfig {
  let parsed: PostgresUrl;
  try {
    parsed = parsePostgresUrl(url);
  } catch {
    return { connectionString: url }; // a form only node-postgres reads (a socket folder in ?host=)
  }
  if (!needsPrimaryLookup(parsed)) {
    return { connectionString: url };
  }
  const locator = primaryLocator(parsed);
  return { connectionString: parsed.singleHostUrl, stream: () => locatingSocket(locator) };
}
