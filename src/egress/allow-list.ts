/**
 * `OPSPAD_WEBHOOK_ALLOW`: the operator's exceptions to the egress guard, for tests and intranets.
 *
 * Entry forms (comma-separated in the variable):
 * - `10.0.0.0/8`, `fd00::/8` — any port of any address in the range;
 * - `10.1.2.3`, `[fd00::1]` — any port of that address;
 * - `127.0.0.1:8080`, `[::1]:8080` — that address and port only;
 * - `hooks.internal`, `hooks.internal:8443` — that host name (any port, or that port), whatever
 *   it resolves to: the operator vouches for the name;
 * - `*.corp.internal` (optionally `:port`) — any name under corp.internal (not the name itself).
 *
 * Addresses are compared as addresses (`127.1` and `127.0.0.1` are one entry; an IPv4-mapped
 * IPv6 address matches its IPv4 entry), names case-insensitively without a trailing dot.
 */
import { BlockList, isIP } from 'node:net';
import { canonicalAddress } from './address-class.ts';

/** What a connection is about to do: the URL's host and port, and the address it will reach. */
export interface EgressTarget {
  /** The URL's hostname as the WHATWG parser normalised it (IPv6 without brackets). */
  hostname: string;
  port: number;
  /** The IP address the socket connects to. */
  address: string;
}

type Entry =
  | { kind: 'addresses'; list: BlockList; port: number | undefined }
  | { kind: 'name'; name: string; wildcard: boolean; port: number | undefined };

export interface AllowList {
  /** The entries as written, for messages and logs. */
  readonly entries: readonly string[];
  allows(target: EgressTarget): boolean;
}

/** Thrown by {@link parseAllowList}; the message names the entry and the forms that work. */
export class AllowListError extends Error {
  override readonly name = 'AllowListError';
}

const FORMS = 'use host, host:port, an IP address, IP:port or a CIDR range such as 10.0.0.0/8';

export function normalizeHostname(hostname: string): string {
  const lower = hostname.toLowerCase();
  const bare = lower.startsWith('[') && lower.endsWith(']') ? lower.slice(1, -1) : lower;
  return bare.endsWith('.') ? bare.slice(0, -1) : bare;
}

function familyOf(address: string): 'ipv4' | 'ipv6' {
  return isIP(address) === 6 ? 'ipv6' : 'ipv4';
}

function parseCidr(entry: string): Entry {
  const slash = entry.lastIndexOf('/');
  const network = entry.slice(0, slash).replace(/^\[(.*)\]$/, '$1');
  const prefixText = entry.slice(slash + 1);
  const family = isIP(network);
  const prefix = Number(prefixText);
  if (family === 0 || !/^\d{1,3}$/.test(prefixText) || prefix > (family === 4 ? 32 : 128)) {
    throw new AllowListError(`"${entry}" is not a CIDR range (e.g. 10.0.0.0/8 or fd00::/8); ${FORMS}`);
  }
  const list = new BlockList();
  list.addSubnet(network, prefix, family === 4 ? 'ipv4' : 'ipv6');
  return { kind: 'addresses', list, port: undefined };
}

function parseEntry(raw: string): Entry {
  const entry = raw.trim();
  if (entry.includes('://')) {
    throw new AllowListError(`"${entry}" is a URL; write only the host (and port), e.g. hooks.internal:8443`);
  }
  if (entry.includes('/')) {
    return parseCidr(entry);
  }
  // A bare IPv6 address has colons a host:port reading would misread.
  if (isIP(entry) === 6) {
    const list = new BlockList();
    list.addAddress(entry, 'ipv6');
    return { kind: 'addresses', list, port: undefined };
  }
  const wildcard = entry.startsWith('*.');
  let url: URL;
  try {
    url = new URL(`http://${wildcard ? entry.slice(2) : entry}`);
  } catch {
    throw new AllowListError(`"${entry}" is not a host or address; ${FORMS}`);
  }
  if (url.username !== '' || url.password !== '' || url.pathname !== '/' || url.search !== '' || url.hash !== '') {
    throw new AllowListError(`"${entry}" has more than a host and a port; ${FORMS}`);
  }
  // An explicit :80 reads back as '' (the scheme's default); recover it from the text.
  const explicitPort = /:(\d+)$/.exec(entry)?.[1];
  const port = explicitPort === undefined ? undefined : Number(explicitPort);
  if (port !== undefined && (port < 1 || port > 65535)) {
    throw new AllowListError(`"${entry}" has port ${port}; ports go from 1 to 65535`);
  }
  const hostname = normalizeHostname(url.hostname);
  if (isIP(hostname) !== 0) {
    if (wildcard) {
      throw new AllowListError(`"${entry}": a wildcard applies to names, not addresses; ${FORMS}`);
    }
    const list = new BlockList();
    list.addAddress(hostname, familyOf(hostname));
    return { kind: 'addresses', list, port };
  }
  return { kind: 'name', name: hostname, wildcard, port };
}

function nameMatches(entry: Extract<Entry, { kind: 'name' }>, hostname: string, port: number): boolean {
  const host = normalizeHostname(hostname);
  const nameOk = entry.wildcard ? host.endsWith(`.${entry.name}`) : host === entry.name;
  return nameOk && (entry.port === undefined || entry.port === port);
}

/** Parses the entries; throws {@link AllowListError} naming the first bad one. */
export function parseAllowList(entries: readonly string[]): AllowList {
  const parsed = entries.filter((entry) => entry.trim() !== '').map(parseEntry);
  return {
    entries: [...entries],
    allows(target) {
      const address = canonicalAddress(target.address);
      return parsed.some((entry) =>
        entry.kind === 'name'
          ? nameMatches(entry, target.hostname, target.port)
          : (entry.port === undefined || entry.port === target.port) && entry.list.check(address, familyOf(address)),
      );
    },
  };
}

/** The problem with each bad entry (empty when all parse), for configuration errors. */
export function allowListProblems(entries: readonly string[]): string[] {
  const problems: string[] = [];
  for (const entry of entries) {
    try {
      parseAllowList([entry]);
    } catch (error) {
      problems.push(error instanceof Error ? error.message : String(error));
    }
  }
  return problems;
}
