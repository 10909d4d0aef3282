import { describe, expect, it } from 'vitest';
import { AllowListError, allowListProblems, parseAllowList } from './allow-list.ts';

const target = (hostname: string, port: number, address: string) => ({ hostname, port, address });

describe('parseAllowList', () => {
  it('allows nothing when empty', () => {
    expect(parseAllowList([]).allows(target('127.0.0.1', 80, '127.0.0.1'))).toBe(false);
  });

  it('matches IP:port exactly, whatever spelling of the address', () => {
    const allow = parseAllowList(['127.0.0.1:8080']);
    expect(allow.allows(target('127.0.0.1', 8080, '127.0.0.1'))).toBe(true);
    expect(allow.allows(target('localhost', 8080, '127.0.0.1'))).toBe(true);
    expect(allow.allows(target('x', 8080, '::ffff:127.0.0.1'))).toBe(true);
    expect(allow.allows(target('127.0.0.1', 8081, '127.0.0.1'))).toBe(false);
    expect(allow.allows(target('127.0.0.2', 8080, '127.0.0.2'))).toBe(false);
    expect(parseAllowList(['127.1:8080']).allows(target('127.0.0.1', 8080, '127.0.0.1'))).toBe(true);
  });

  it('matches an address on any port, and ranges', () => {
    const allow = parseAllowList(['10.1.2.3', '192.168.0.0/16', 'fd00::/8', '[fd12::1]:9000', '::1']);
    expect(allow.allows(target('a', 1, '10.1.2.3'))).toBe(true);
    expect(allow.allows(target('a', 443, '192.168.77.1'))).toBe(true);
    expect(allow.allows(target('a', 443, '192.169.0.1'))).toBe(false);
    expect(allow.allows(target('a', 443, 'fd00:ec2::254'))).toBe(true);
    expect(allow.allows(target('a', 9000, 'fd12::1'))).toBe(true);
    expect(allow.allows(target('a', 443, '::1'))).toBe(true);
  });

  it('matches names with or without port, a wildcard on subdomains only, case and trailing dot aside', () => {
    const allow = parseAllowList(['Hooks.Internal', 'api.internal:8443', '*.corp.internal']);
    expect(allow.allows(target('hooks.internal.', 1, '10.0.0.1'))).toBe(true);
    expect(allow.allows(target('api.internal', 8443, '10.0.0.2'))).toBe(true);
    expect(allow.allows(target('api.internal', 443, '10.0.0.2'))).toBe(false);
    expect(allow.allows(target('a.b.corp.internal', 80, '10.0.0.3'))).toBe(true);
    expect(allow.allows(target('corp.internal', 80, '10.0.0.3'))).toBe(false);
    expect(allow.allows(target('evilcorp.internal', 80, '10.0.0.3'))).toBe(false);
  });

  it.each([
    ['10.0.0.0/33', 'not a CIDR range'],
    ['hooks.internal/8', 'not a CIDR range'],
    ['http://hooks.internal', 'is a URL'],
    ['hooks.internal?x=1', 'more than a host'],
    ['user@hooks.internal', 'more than a host'],
    ['hooks.internal:0', 'ports go from 1 to 65535'],
    ['*.10.0.0.1', 'wildcard'],
    ['exa mple', 'not a host'],
  ])('refuses %s, saying %s', (entry, phrase) => {
    expect(() => parseAllowList([entry])).toThrow(AllowListError);
    expect(allowListProblems([entry])[0]).toContain(phrase);
  });
});
