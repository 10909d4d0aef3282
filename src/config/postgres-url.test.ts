/**
 * The libpq multi-host form of a Postgres URL: hosts and ports in order, target_session_attrs
 * read and taken out of what node-postgres gets, nonsense refused with a message that echoes no
 * host or password; and the settings accept the form.
 */
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from './env.ts';
import { needsPrimaryLookup, parsePostgresUrl } from './postgres-url.ts';

describe('parsePostgresUrl', () => {
  it('reads the host list pg_autoctl show uri prints', () => {
    const parsed = parsePostgresUrl(
      'postgres://app:s%40cret@10.0.0.1:6001,db-2.internal:6002,[::1]/opspad?target_session_attrs=read-write&sslmode=prefer',
    );
    expect(parsed.hosts).toEqual([
      { host: '10.0.0.1', port: 6001 },
      { host: 'db-2.internal', port: 6002 },
      { host: '::1', port: 5432 },
    ]);
    expect(parsed.targetSessionAttrs).toBe('read-write');
    expect(parsed.singleHostUrl).toBe('postgres://app:s%40cret@10.0.0.1:6001/opspad?sslmode=prefer');
    expect(needsPrimaryLookup(parsed)).toBe(true);
  });

  it('reads a single host as one, needing no lookup unless told to find a primary', () => {
    const single = parsePostgresUrl('postgresql://localhost/opspad');
    expect(single).toEqual({
      hosts: [{ host: 'localhost', port: 5432 }],
      targetSessionAttrs: 'any',
      singleHostUrl: 'postgresql://localhost:5432/opspad',
    });
    expect(needsPrimaryLookup(single)).toBe(false);
    expect(needsPrimaryLookup(parsePostgresUrl('postgresql://h:1/db?target_session_attrs=primary'))).toBe(true);
  });

  it.each([
    ['postgresql://a:1,,b:2/db', 'a host of the list is empty'],
    ['postgresql://a:1,b:99999/db', 'a port of the host list is not a port'],
    ['postgresql://a:1,b:x/db', 'a port of the host list is not a port'],
    ['postgresql://a:1,b:2/db?target_session_attrs=standby', 'target_session_attrs is "standby"'],
    ['mysql://a:1,b:2/db', 'it is not postgresql://'],
  ])('refuses %s', (url, message) => {
    expect(() => parsePostgresUrl(url)).toThrow(message);
  });
});

describe('DATABASE_URL in the settings', () => {
  it('accepts the multi-host form and keeps it as given', () => {
    const url = 'postgresql://app@h1:6001,h2:6002/opspad?target_session_attrs=read-write';
    expect(loadConfig({ DATABASE_URL: url, DATABASE_DIRECT_URL: url }).DATABASE_URL).toBe(url);
  });

  it('refuses a broken host list, saying what the form is, without echoing the URL', () => {
    let error: unknown;
    try {
      loadConfig({ DATABASE_URL: 'postgresql://app:hunter2@h1:6001,db.internal:0/opspad' });
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const message = (error as Error).message;
    expect(message).toContain("DATABASE_URL: must be a Postgres URL, one host or libpq's host list");
    expect(message).toContain('a port of the host list is not a port (1 to 65535)');
    expect(message).not.toContain('hunter2');
    expect(message).not.toContain('db.internal');
  });
});
