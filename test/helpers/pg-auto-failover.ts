/**
 * A pg_auto_failover formation of a test's own: a monitor and two Postgres nodes on spare
 * loopback ports, synchronous replication (the formation's default with one standby), from
 * Debian's `postgresql-15-auto-failover` — installed with apt-get when missing and the run is
 * root, as PgBouncer and Chromium are; otherwise the test fails with the command to run. Each
 * `pg_autoctl … --run` runs in a process group of its own, so a node (its keeper and its
 * postmaster) can be lost at once, as a machine is. The monitor's health checks are tightened
 * from their defaults (5 s period, 20 s before a node counts as unhealthy, 30 s for a lost
 * primary to demote itself) to 1 s, 2 s and 3 s.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { openSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { createPostgresDatabase, runMigrations } from '../../src/store/index.ts';
import { ensureTool } from './debian-tool.ts';
import { clusterFolder, PG_BIN } from './postgres-cluster.ts';
import { freePort } from './stdout-readers.ts';
import { eventually } from './wait.ts';

const SETUP_TIMEOUT_MS = 300_000;

export const ensurePgAutoctl = (): string =>
  ensureTool({
    name: 'pg_auto_failover',
    package: 'postgresql-15-auto-failover',
    defaultPath: '/usr/bin/pg_autoctl',
    variable: 'OPSPAD_TEST_PG_AUTOCTL',
    neededBy: 'The Postgres failover tests',
    executable: 'a pg_autoctl executable',
    setupTimeoutMs: SETUP_TIMEOUT_MS,
  });

/** The monitor's settings that decide how soon a lost primary is replaced. */
const HEALTH_CHECKS = {
  'pgautofailover.health_check_period': 1000,
  'pgautofailover.health_check_timeout': 1000,
  'pgautofailover.health_check_max_retries': 1,
  'pgautofailover.health_check_retry_delay': 500,
  'pgautofailover.node_considered_unhealthy_timeout': 2000,
  // How long an unreachable primary is given to demote itself before the standby is promoted
  // (30 s by default): the loss here is of the whole node, so nothing can demote.
  'pgautofailover.primary_demote_timeout': 3000,
};

export interface Formation {
  /** `pg_autoctl show uri --formation default`, with the user: the multi-host URL of database `opspad`. */
  readonly url: string;
  /** The node that answers and takes writes now, by name (`node1`, `node2`). */
  primary(): Promise<string | undefined>;
  /** SIGKILLs the node's keeper and postmaster together. */
  lose(node: string): void;
  /** The port of a node. */
  portOf(node: string): number;
  remove(): Promise<void>;
}

export async function startFormation(): Promise<Formation> {
  const autoctl = ensurePgAutoctl();
  const folder = clusterFolder('paf');
  const asRoot = process.getuid?.() === 0;
  // pg_autoctl keeps its configuration and state under XDG folders: the formation's own.
  const env = [
    `PATH=${PG_BIN}:${process.env.PATH ?? ''}`,
    `XDG_CONFIG_HOME=${join(folder, 'config')}`,
    `XDG_DATA_HOME=${join(folder, 'share')}`,
  ];
  const command = (args: readonly string[]): [string, string[]] =>
    asRoot
      ? ['runuser', ['-u', 'postgres', '--', 'env', ...env, autoctl, ...args]]
      : ['env', [...env, autoctl, ...args]];
  const groups = new Map<string, ChildProcess>();
  const run = (name: string, args: readonly string[]) => {
    const log = openSync(join(folder, `${name}.log`), 'a');
    const [program, argv] = command([...args, '--run']);
    const child = spawn(program, argv, { detached: true, stdio: ['ignore', log, log] });
    child.unref();
    groups.set(name, child);
  };
  const killGroup = (name: string) => {
    const child = groups.get(name);
    if (child?.pid !== undefined && child.exitCode === null) {
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  };
  const ports = { monitor: await freePort(), node1: await freePort(), node2: await freePort() };
  const monitorUrl = `postgres://autoctl_node@127.0.0.1:${ports.monitor}/pg_auto_failover?sslmode=disable`;
  const asPostgres = (port: number, database: string) => `postgres://postgres@127.0.0.1:${port}/${database}`;
  const query = async <R extends pg.QueryResultRow>(url: string, text: string): Promise<R[] | undefined> => {
    const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2000 });
    client.on('error', () => {});
    try {
      await client.connect();
      return (await client.query<R>(text)).rows;
    } catch {
      return undefined;
    } finally {
      await client.end().catch(() => {});
    }
  };
  const states = async () =>
    (await query<{ nodename: string; reportedstate: string }>(
      asPostgres(ports.monitor, 'pg_auto_failover'),
      'SELECT nodename, reportedstate FROM pgautofailover.node ORDER BY nodeid',
    )) ?? [];
  const common = ['--hostname', '127.0.0.1', '--auth', 'trust', '--no-ssl'];
  const remove = async () => {
    for (const name of groups.keys()) {
      killGroup(name);
    }
    rmSync(folder, { recursive: true, force: true });
  };
  try {
    run('monitor', [
      'create',
      'monitor',
      '--pgdata',
      join(folder, 'monitor'),
      '--pgport',
      String(ports.monitor),
      ...common,
    ]);
    await eventually(async () => (await query(asPostgres(ports.monitor, 'pg_auto_failover'), 'SELECT 1')) && true, {
      timeoutMs: 60_000,
      intervalMs: 250,
      what: 'the monitor to start',
    });
    const settings = Object.entries(HEALTH_CHECKS).map(([name, value]) => `ALTER SYSTEM SET ${name} = ${value}`);
    for (const statement of [...settings, 'SELECT pg_reload_conf()']) {
      await query(asPostgres(ports.monitor, 'postgres'), statement);
    }
    for (const node of ['node1', 'node2'] as const) {
      run(node, [
        'create',
        'postgres',
        '--pgdata',
        join(folder, node),
        '--pgport',
        String(ports[node]),
        '--name',
        node,
        '--dbname',
        'opspad',
        '--monitor',
        monitorUrl,
        ...common,
      ]);
      const wanted = node === 'node1' ? ['single', 'wait_primary', 'primary'] : ['secondary'];
      await eventually(
        async () => {
          // The standby's base backup waits for a checkpoint, spread over minutes unless asked.
          if (node === 'node2') {
            await query(asPostgres(ports.node1, 'opspad'), 'CHECKPOINT');
          }
          const state = (await states()).find((s) => s.nodename === node)?.reportedstate;
          return state && wanted.includes(state) ? true : undefined;
        },
        { timeoutMs: 120_000, intervalMs: 500, what: `${node} to be ${wanted.join(' or ')}` },
      );
    }
    await eventually(
      async () =>
        (await states()).find((s) => s.nodename === 'node1')?.reportedstate === 'primary' ? true : undefined,
      { timeoutMs: 60_000, intervalMs: 250, what: 'node1 to be primary with a synchronous standby' },
    );
    const [program, argv] = command(['show', 'uri', '--formation', 'default', '--monitor', monitorUrl]);
    const shown = spawnSync(program, argv, { encoding: 'utf8' }).stdout.trim();
    // The URI names no user: the clients here are the cluster's superuser.
    const url = shown.replace(/^postgres(ql)?:\/\//, 'postgres://postgres@');
    const db = createPostgresDatabase({ connectionString: url, poolSize: 1 });
    await runMigrations(db);
    await db.close();
    return {
      url,
      async primary() {
        // Asked of the nodes themselves: the monitor keeps a lost node's last reported state.
        for (const node of ['node1', 'node2'] as const) {
          const rows = await query<{ recovery: boolean }>(
            asPostgres(ports[node], 'opspad'),
            'SELECT pg_is_in_recovery() AS recovery',
          );
          if (rows?.[0]?.recovery === false) {
            return node;
          }
        }
        return undefined;
      },
      lose: killGroup,
      portOf: (node) => ports[node as 'node1' | 'node2'],
      remove,
    };
  } catch (error) {
    await remove();
    throw error;
  }
}
