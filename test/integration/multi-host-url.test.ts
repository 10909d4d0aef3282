/**
 * A multi-host DATABASE_URL on a real server: the pool skips a host that refuses and a node that
 * does not take writes, as libpq's target_session_attrs=read-write does, and with no writable
 * node at all a query fails with an error opspad answers as "the database is gone" (a 503).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createPostgresDatabase, isDatabaseGone, type PostgresDatabase } from '../../src/store/index.ts';
import { fileDatabaseUrl } from '../helpers/file-database.ts';
import { sparePort } from '../helpers/postgres-cluster.ts';

const opened: PostgresDatabase[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((db) => db.close()));
});

/** The file's database URL with `hosts` in place of its one host, and `query` added. */
function multiHost(hosts: string, query: string): string {
  const url = new URL(fileDatabaseUrl());
  const auth = url.username ? `${url.username}${url.password ? `:${url.password}` : ''}@` : '';
  const params = new URLSearchParams(url.search);
  for (const [name, value] of new URLSearchParams(query)) {
    params.set(name, value);
  }
  return `${url.protocol}//${auth}${hosts}${url.pathname}?${params.toString()}`;
}

function open(connectionString: string): PostgresDatabase {
  const db = createPostgresDatabase({ connectionString, poolSize: 2 });
  opened.push(db);
  return db;
}

describe('a multi-host DATABASE_URL', () => {
  it('connects to the writable host after one that refuses', async () => {
    const server = new URL(fileDatabaseUrl());
    const dead = await sparePort();
    const db = open(
      multiHost(`127.0.0.1:${dead},${server.hostname}:${server.port || 5432}`, 'target_session_attrs=read-write'),
    );
    const rows = await db.query<{ port: number; recovery: boolean }>(
      'SELECT inet_server_port() AS port, pg_is_in_recovery() AS recovery',
    );
    expect(rows).toEqual([{ port: Number(server.port || 5432), recovery: false }]);
    // The LISTEN-style session pool goes the same way.
    expect(await db.withTryLock(424_242, async () => 'locked')).toBe('locked');
  });

  it('passes over a node that does not take writes, and says no writable one answered', async () => {
    const server = new URL(fileDatabaseUrl());
    const dead = await sparePort();
    // Every session of this URL is read-only: the node a failover has just demoted looks so.
    const db = open(
      multiHost(
        `127.0.0.1:${dead},${server.hostname}:${server.port || 5432}`,
        'target_session_attrs=read-write&options=-c default_transaction_read_only=on',
      ),
    );
    const error = await db.query('SELECT 1').then(
      () => undefined,
      (caught: unknown) => caught,
    );
    expect(String(error)).toMatch(/no read-write server among the hosts of the database URL/);
    expect(String(error)).toMatch(/a standby or read-only node/);
    expect(isDatabaseGone(error)).toBe(true);
  });
});
