/**
 * Which IP addresses an outbound call a tenant aims may reach. Pure: no DNS, no sockets.
 *
 * IPv4: everything is public except the special-purpose ranges below (RFC 6890 and its
 * successors). IPv6: only global unicast (2000::/3) is public, minus the documentation and
 * IETF-protocol blocks; addresses that carry an IPv4 address inside them (IPv4-mapped
 * `::ffff:a.b.c.d`, NAT64 `64:ff9b::/96`, 6to4 `2002::/16`) are judged by that IPv4 address, so
 * `[::ffff:127.0.0.1]` is loopback and `[::ffff:8.8.8.8]` is public.
 *
 * Callers pass addresses in any textual form `net.isIP` accepts; the odd IPv4 forms a URL may
 * hold (`127.1`, `2130706433`, `0x7f000001`) are normalised by the WHATWG URL parser before
 * they get here (see url-check.ts).
 */
import { BlockList, isIP, SocketAddress } from 'node:net';

/** Why an address is not public. */
export type BlockedKind =
  | 'unspecified'
  | 'loopback'
  | 'private'
  | 'shared'
  | 'link-local'
  | 'multicast'
  | 'reserved'
  | 'documentation'
  | 'unique-local'
  | 'site-local';

/** How each kind reads in a message ("10.0.0.1 is a private address"). */
export const BLOCKED_KIND_PHRASES: Readonly<Record<BlockedKind, string>> = {
  unspecified: 'an unspecified address (0.0.0.0 or ::, which reach this machine)',
  loopback: 'a loopback address (this machine)',
  private: 'a private (RFC 1918) address',
  shared: 'a carrier-grade NAT (100.64.0.0/10) address',
  'link-local': 'a link-local address (where cloud metadata services live)',
  multicast: 'a multicast or broadcast address',
  reserved: 'a reserved address',
  documentation: 'a documentation address',
  'unique-local': 'an IPv6 unique-local (fc00::/7) address',
  'site-local': 'an IPv6 site-local (fec0::/10) address',
};

export const IPV4_RANGES: readonly [string, number, BlockedKind][] = [
  ['0.0.0.0', 8, 'unspecified'],
  ['10.0.0.0', 8, 'private'],
  ['100.64.0.0', 10, 'shared'],
  ['127.0.0.0', 8, 'loopback'],
  ['169.254.0.0', 16, 'link-local'],
  ['172.16.0.0', 12, 'private'],
  ['192.0.0.0', 24, 'reserved'],
  ['192.0.2.0', 24, 'documentation'],
  ['192.88.99.0', 24, 'reserved'],
  ['192.168.0.0', 16, 'private'],
  ['198.18.0.0', 15, 'reserved'],
  ['198.51.100.0', 24, 'documentation'],
  ['203.0.113.0', 24, 'documentation'],
  ['224.0.0.0', 4, 'multicast'],
  // 240.0.0.0/4 is reserved for future use and holds the broadcast address 255.255.255.255.
  ['240.0.0.0', 4, 'reserved'],
];

/** Checked in order: the embedded-IPv4 ranges are handled before these (see classifyIPv6). */
const IPV6_RANGES: readonly [string, number, BlockedKind][] = [
  ['::', 128, 'unspecified'],
  ['::1', 128, 'loopback'],
  ['fc00::', 7, 'unique-local'],
  ['fe80::', 10, 'link-local'],
  ['fec0::', 10, 'site-local'],
  ['ff00::', 8, 'multicast'],
  // Teredo (2001::/32), benchmarking and ORCHID live in 2001::/23, the IETF protocol block.
  ['2001::', 23, 'reserved'],
  ['2001:db8::', 32, 'documentation'],
  ['3fff::', 20, 'documentation'],
];

/** A dotted quad `net.isIP` accepted, as an unsigned 32-bit number. */
function ipv4Number(address: string): number {
  const [a, b, c, d] = address.split('.').map(Number) as [number, number, number, number];
  return ((a << 24) | (b << 16) | (c << 8) | d) >>> 0;
}

// IPv4 ranges are compared as numbers: a BlockList check builds a SocketAddress per list, which
// cost the webhook handler about a tenth of its CPU (each request's URL and address are judged).
const IPV4_MASKS = IPV4_RANGES.map(([network, prefix, kind]) => {
  // A shift by 32 is a shift by 0 in JavaScript: a /0 range masks nothing.
  const mask = prefix === 0 ? 0 : (0xffffffff << (32 - prefix)) >>> 0;
  return { network: (ipv4Number(network) & mask) >>> 0, mask, kind };
});

const IPV6_LISTS = IPV6_RANGES.map(([network, prefix, kind]) => {
  const list = new BlockList();
  list.addSubnet(network, prefix, 'ipv6');
  return { list, kind };
});
const GLOBAL_UNICAST = new BlockList();
GLOBAL_UNICAST.addSubnet('2000::', 3, 'ipv6');

/** The 16 bytes of an IPv6 address in any valid text form (`::`, embedded dotted quad). */
export function ipv6Bytes(address: string): Uint8Array {
  const bytes = new Uint8Array(16);
  let text = address;
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  let tail: number[] = [];
  if (dotted) {
    tail = dotted.slice(1, 5).map(Number);
    text = `${text.slice(0, dotted.index)}0:0`;
  }
  const [head = '', rest] = text.split('::');
  const parse = (part: string) => (part === '' ? [] : part.split(':').map((group) => Number.parseInt(group, 16)));
  const front = parse(head);
  const back = rest === undefined ? [] : parse(rest);
  const groups = [...front, ...new Array<number>(8 - front.length - back.length).fill(0), ...back];
  groups.forEach((group, i) => {
    bytes[i * 2] = group >> 8;
    bytes[i * 2 + 1] = group & 0xff;
  });
  if (tail.length === 4) {
    bytes.set(tail, 12);
  }
  return bytes;
}

function ipv4At(bytes: Uint8Array, offset: number): string {
  return Array.from(bytes.subarray(offset, offset + 4)).join('.');
}

/**
 * The IPv4 address an IPv6 address stands for, when it has one: IPv4-mapped (`::ffff:0:0/96`),
 * NAT64 (`64:ff9b::/96`) or 6to4 (`2002::/16`, the IPv4 address in bits 16–47). A connection to
 * any of these can end at that IPv4 address.
 */
export function embeddedIPv4(address: string): string | undefined {
  const b = ipv6Bytes(address);
  const zeros = (from: number, to: number) => b.subarray(from, to).every((byte) => byte === 0);
  if (zeros(0, 10) && b[10] === 0xff && b[11] === 0xff) {
    return ipv4At(b, 12);
  }
  if (b[0] === 0x00 && b[1] === 0x64 && b[2] === 0xff && b[3] === 0x9b && zeros(4, 12)) {
    return ipv4At(b, 12);
  }
  if (b[0] === 0x20 && b[1] === 0x02) {
    return ipv4At(b, 2);
  }
  return undefined;
}

function classifyIPv6(address: string): BlockedKind | undefined {
  const embedded = embeddedIPv4(address);
  if (embedded !== undefined) {
    return classifyIPv4(embedded);
  }
  let socketAddress: SocketAddress;
  try {
    socketAddress = new SocketAddress({ address, family: 'ipv6' });
  } catch {
    // Text isIP took as IPv6 that SocketAddress refuses (long zoned text did, before bareAddress
    // dropped zones): no answer is no permission.
    return 'reserved';
  }
  for (const { list, kind } of IPV6_LISTS) {
    if (list.check(socketAddress)) {
      return kind;
    }
  }
  // Outside global unicast: IPv4-compatible (::/96), the discard prefix, unassigned space.
  return GLOBAL_UNICAST.check(socketAddress) ? undefined : 'reserved';
}

function classifyIPv4(address: string): BlockedKind | undefined {
  const n = ipv4Number(address);
  for (const { network, mask, kind } of IPV4_MASKS) {
    if ((n & mask) >>> 0 === network) {
      return kind;
    }
  }
  return undefined;
}

/**
 * The address without URL brackets or an IPv6 zone (`fe80::1%eth0`): `net.isIP` accepts a zone,
 * which the byte parsing below would misread (`::ffff:127.0.0.1%1.2.3.4` as 1.2.3.4).
 */
function bareAddress(address: string): string {
  const bare = address.startsWith('[') && address.endsWith(']') ? address.slice(1, -1) : address;
  const zone = bare.indexOf('%');
  return zone === -1 || isIP(bare) !== 6 ? bare : bare.slice(0, zone);
}

/**
 * Why `address` may not be called, or undefined when it is public. Anything that is not an IP
 * address at all counts as reserved: a guard must fail closed.
 */
export function classifyAddress(address: string): BlockedKind | undefined {
  const bare = bareAddress(address);
  switch (isIP(bare)) {
    case 4:
      return classifyIPv4(bare);
    case 6:
      return classifyIPv6(bare);
    default:
      return 'reserved';
  }
}

/**
 * The IPv4 form of an IPv4-mapped IPv6 address (`::ffff:127.0.0.1` → `127.0.0.1`), else the
 * address unchanged: how allow-list entries and resolved addresses are compared.
 */
export function canonicalAddress(address: string): string {
  const bare = bareAddress(address);
  if (isIP(bare) !== 6) {
    return bare;
  }
  const b = ipv6Bytes(bare);
  if (b.subarray(0, 10).every((byte) => byte === 0) && b[10] === 0xff && b[11] === 0xff) {
    return ipv4At(b, 12);
  }
  return bare.toLowerCase();
}
