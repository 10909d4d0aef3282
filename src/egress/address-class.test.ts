import { BlockList } from 'node:net';
import { describe, expect, it } from 'vitest';
import { canonicalAddress, classifyAddress, embeddedIPv4, IPV4_RANGES } from './address-class.ts';

describe('classifyAddress', () => {
  it.each([
    ['127.0.0.1', 'loopback'],
    ['127.255.255.254', 'loopback'],
    ['0.0.0.0', 'unspecified'],
    ['0.1.2.3', 'unspecified'],
    ['10.0.0.1', 'private'],
    ['172.16.0.1', 'private'],
    ['172.31.255.255', 'private'],
    ['192.168.1.1', 'private'],
    ['100.64.0.1', 'shared'],
    ['100.127.255.255', 'shared'],
    ['169.254.169.254', 'link-local'],
    ['169.254.0.1', 'link-local'],
    ['224.0.0.1', 'multicast'],
    ['239.255.255.250', 'multicast'],
    ['255.255.255.255', 'reserved'],
    ['240.0.0.1', 'reserved'],
    ['192.0.0.192', 'reserved'],
    ['198.18.0.1', 'reserved'],
    ['192.0.2.1', 'documentation'],
    ['::', 'unspecified'],
    ['::1', 'loopback'],
    ['[::1]', 'loopback'],
    ['0:0:0:0:0:0:0:1', 'loopback'],
    ['fd00:ec2::254', 'unique-local'],
    ['fc00::1', 'unique-local'],
    ['fe80::1', 'link-local'],
    ['fec0::1', 'site-local'],
    ['ff02::1', 'multicast'],
    ['::ffff:127.0.0.1', 'loopback'],
    ['::ffff:7f00:1', 'loopback'],
    ['::ffff:a9fe:a9fe', 'link-local'],
    ['::ffff:10.0.0.1', 'private'],
    ['64:ff9b::7f00:1', 'loopback'],
    ['64:ff9b::a9fe:a9fe', 'link-local'],
    ['2002:7f00:1::1', 'loopback'],
    ['2002:c0a8:0101::', 'private'],
    ['::7f00:1', 'reserved'],
    ['::127.0.0.1', 'reserved'],
    ['100::1', 'reserved'],
    ['2001::1', 'reserved'],
    ['2001:db8::1', 'documentation'],
    ['3fff::1', 'documentation'],
    ['::ffff:127.0.0.1%1.2.3.4', 'loopback'],
    ['0000:0000:0000:0000:0000:ffff:127.0.0.1%eth0', 'loopback'],
    ['fe80::1%eth0', 'link-local'],
    ['not an address', 'reserved'],
    ['', 'reserved'],
  ])('%s is %s', (address, kind) => {
    expect(classifyAddress(address)).toBe(kind);
  });

  it.each([
    '8.8.8.8',
    '1.1.1.1',
    '93.184.216.34',
    '172.32.0.1',
    '100.128.0.1',
    '11.0.0.1',
    '2606:4700:4700::1111',
    '2a00:1450:4001:80b::200e',
    '::ffff:8.8.8.8',
    '64:ff9b::808:808',
    '2002:808:808::1',
  ])('%s is public', (address) => {
    expect(classifyAddress(address)).toBeUndefined();
  });

  it('answers, never throws, for the longest IPv6 text with a zone (judged without it)', () => {
    expect(() => classifyAddress('1111:2222:3333:4444:5555:6666:255.255.255.255%x')).not.toThrow();
    expect(classifyAddress('1111:2222:3333:4444:5555:6666:255.255.255.255%x')).toBe('reserved');
  });

  it("judges IPv4 as node's BlockList does, at every range's edges and across the space", () => {
    const lists = IPV4_RANGES.map(([network, prefix, kind]) => {
      const list = new BlockList();
      list.addSubnet(network, prefix, 'ipv4');
      return { list, kind };
    });
    const reference = (address: string) => lists.find(({ list }) => list.check(address, 'ipv4'))?.kind;
    const dotted = (n: number) => [24, 16, 8, 0].map((shift) => (n >>> shift) & 0xff).join('.');
    const numbers: number[] = [0, 0xffffffff];
    for (const [network, prefix] of IPV4_RANGES) {
      const first = network.split('.').reduce((n, part) => n * 256 + Number(part), 0);
      const last = first + 2 ** (32 - prefix) - 1;
      numbers.push(first - 1, first, first + 1, last - 1, last, last + 1);
    }
    // A fixed sequence (a linear congruential generator), so a failure names the same addresses.
    let seed = 12345;
    for (let i = 0; i < 20_000; i++) {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      numbers.push((seed * 2 + (i & 1)) >>> 0);
    }
    const addresses = numbers.filter((n) => n >= 0 && n <= 0xffffffff).map(dotted);
    expect(addresses.filter((address) => classifyAddress(address) !== reference(address))).toEqual([]);
    expect(addresses.filter((address) => classifyAddress(`::ffff:${address}`) !== reference(address))).toEqual([]);
  });
});

describe('embeddedIPv4 and canonicalAddress', () => {
  it('finds the IPv4 address in mapped, NAT64 and 6to4 forms only', () => {
    expect(embeddedIPv4('::ffff:192.168.0.1')).toBe('192.168.0.1');
    expect(embeddedIPv4('64:ff9b::c0a8:1')).toBe('192.168.0.1');
    expect(embeddedIPv4('2002:c0a8:1::')).toBe('192.168.0.1');
    expect(embeddedIPv4('2606:4700::1')).toBeUndefined();
  });

  it('turns an IPv4-mapped address into its IPv4 form and leaves the rest', () => {
    expect(canonicalAddress('::ffff:7f00:1')).toBe('127.0.0.1');
    expect(canonicalAddress('[::FFFF:127.0.0.1]')).toBe('127.0.0.1');
    expect(canonicalAddress('10.0.0.1')).toBe('10.0.0.1');
    expect(canonicalAddress('FD00::1')).toBe('fd00::1');
    expect(canonicalAddress('::ffff:127.0.0.1%eth0')).toBe('127.0.0.1');
  });
});
