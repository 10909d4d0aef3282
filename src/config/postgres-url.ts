/**
 * How a Postgres URL reads, the libpq multi-host form included:
 * `postgresql://user:secret@host1:5432,host2:5433/db?target_session_attrs=read-write`. High
 * availability setups (pg_auto_failover, Patroni with several hosts, libpq clients in general)
 * hand out their address this way; node-postgres reads only the first host of it, or none.
 * A URL with one host reads as one host.
 */

export interface PostgresHost {
  host: string;
  port: number;
}

/** The libpq values opspad honours: any node, or only one that takes writes. */
export const SESSION_ATTRS = ['any', 'read-write', 'primary'] as const;
export type SessionAttrs = (typeof SESSION_ATTRS)[number];

export interface PostgresUrl {
  hosts: PostgresHost[];
  /** Which node a connection may use: `any`, or (`read-write`, `primary`) only the writable one. */
  targetSessionAttrs: SessionAttrs;
  /** The URL with the first host only and without target_session_attrs: what node-postgres reads. */
  singleHostUrl: string;
}

const DEFAULT_PORT = 5432;
const SHAPE = /^(postgres(?:ql)?:)\/\/(?:([^@/?#]*)@)?([^/?#]*)([^?#]*)(\?[^#]*)?$/;

/**
 * Splits `host:port` (or `[v6]:port`); a host without a port gets `fallbackPort`. Its messages
 * name no host: a URL's parts are not echoed into logs.
 */
function hostOf(text: string, fallbackPort: number): PostgresHost {
  const match = /^(\[[^\]]+\]|[^:]*)(?::([^:]*))?$/.exec(text);
  const host = match?.[1] ?? '';
  if (!match || host === '' || host === '[]') {
    throw new Error('a host of the list is empty or not host:port');
  }
  const portText = match[2];
  const port =
    portText === undefined || portText === '' ? fallbackPort : /^\d+$/.test(portText) ? Number(portText) : NaN;
  if (!Number.isInteger(port) || port < 1 || port > 65535) {
    throw new Error('a port of the host list is not a port (1 to 65535)');
  }
  return { host: decodeURIComponent(host.replace(/^\[(.*)\]$/, '$1')), port };
}

/** Reads `url`, or throws an Error saying what is wrong with it (for the settings' message). */
export function parsePostgresUrl(url: string): PostgresUrl {
  const match = SHAPE.exec(url.trim());
  if (!match) {
    throw new Error('it is not postgresql://[user[:password]@]host[:port][,host[:port]…][/database][?parameters]');
  }
  const [, protocol, userinfo, hostList = '', path = '', query = ''] = match;
  const params = new URLSearchParams(query);
  const attrs = params.get('target_session_attrs') ?? 'any';
  if (!(SESSION_ATTRS as readonly string[]).includes(attrs)) {
    throw new Error(
      `target_session_attrs is "${attrs}"; opspad writes, so use ${SESSION_ATTRS.map((a) => `"${a}"`).join(', ')}`,
    );
  }
  params.delete('target_session_attrs');
  const hosts = hostList.split(',').map((part) => hostOf(part.trim(), DEFAULT_PORT));
  const first = hosts[0] as PostgresHost;
  const rest = params.toString();
  const singleHostUrl = `${protocol}//${userinfo === undefined ? '' : `${userinfo}@`}${
    first.host.includes(':') && !first.host.startsWith('[') ? `[${first.host}]` : first.host
  }:${first.port}${path}${rest ? `?${rest}` : ''}`;
  // What remains must be a URL node-postgres can read.
  new URL(singleHostUrl);
  return { hosts, targetSessionAttrs: attrs as SessionAttrs, singleHostUrl };
}

/** Whether connections must find the node among several that takes writes. */
export function needsPrimaryLookup(parsed: PostgresUrl): boolean {
  return parsed.hosts.length > 1 || parsed.targetSessionAttrs !== 'any';
}
