/**
 * A PgBouncer in transaction mode in front of the run's Postgres, for the tests of opspad behind
 * a pooler: Debian's `pgbouncer` (at /usr/sbin/pgbouncer, or OPSPAD_TEST_PGBOUNCER), installed
 * with apt-get when it is missing and the run is root, as the browser tests do with Chromium;
 * otherwise the test fails with the command to run. It listens on a spare loopback port, trusts
 * the server's users (the run's Postgres trusts loopback), and runs as `nobody` when started by
 * root (PgBouncer refuses to run as root). `stop` kills it and removes its directory.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type DebianTool, ensureTool, type ToolPlan, toolPlan } from './debian-tool.ts';
import { freePort } from './stdout-readers.ts';
import { eventually } from './wait.ts';

export const DEFAULT_PGBOUNCER = '/usr/sbin/pgbouncer';
/** Installing PgBouncer takes well under a minute; the hook that may do it gets this long. */
export const PGBOUNCER_SETUP_TIMEOUT_MS = 300_000;

const PGBOUNCER: DebianTool = {
  name: 'PgBouncer',
  package: 'pgbouncer',
  defaultPath: DEFAULT_PGBOUNCER,
  variable: 'OPSPAD_TEST_PGBOUNCER',
  neededBy: 'The pooler tests',
  executable: 'a pgbouncer executable',
  setupTimeoutMs: PGBOUNCER_SETUP_TIMEOUT_MS,
};

/** What to do, given the machine (see toolPlan). */
export const pgBouncerPlan = (machine: Parameters<typeof toolPlan>[1]): ToolPlan => toolPlan(PGBOUNCER, machine);

/** The pgbouncer executable, installed first if this machine lacks it and allows it. */
export const ensurePgBouncer = (): string => ensureTool(PGBOUNCER);

export interface PgBouncerUnderTest {
  /** `serverUrl` with PgBouncer's address instead of the server's (same user and database). */
  urlFor(serverUrl: string): string;
  readonly port: number;
  stop(): Promise<void>;
}

// Last resort if the test process itself goes away: never leave a PgBouncer running.
const running = new Set<ChildProcess>();
process.once('exit', () => {
  for (const bouncer of running) {
    bouncer.kill('SIGKILL');
  }
});

/**
 * Starts one in transaction mode in front of the server of `serverUrl`. `aliases` adds databases
 * of PgBouncer's own: name → (server database, server connections at most).
 */
export async function startPgBouncer(
  serverUrl: string,
  aliases: Record<string, { database: string; poolSize: number }> = {},
): Promise<PgBouncerUnderTest> {
  const executable = ensurePgBouncer();
  const server = new URL(serverUrl);
  const host = server.hostname;
  const serverPort = server.port || '5432';
  const user = decodeURIComponent(server.username || 'postgres');
  const dir = await mkdtemp(join(tmpdir(), 'opspad-pgbouncer-'));
  // Read by PgBouncer as `nobody` when the run is root.
  await chmod(dir, 0o755);
  const port = await freePort();
  const databases = [
    ...Object.entries(aliases).map(
      ([alias, { database, poolSize }]) =>
        `${alias} = host=${host} port=${serverPort} dbname=${database} pool_size=${poolSize}`,
    ),
    `* = host=${host} port=${serverPort}`,
  ];
  const ini = [
    '[databases]',
    ...databases,
    '[pgbouncer]',
    'listen_addr = 127.0.0.1',
    `listen_port = ${port}`,
    'unix_socket_dir =',
    'auth_type = trust',
    `auth_file = ${join(dir, 'users.txt')}`,
    'pool_mode = transaction',
    'default_pool_size = 4',
    'max_client_conn = 200',
    `admin_users = ${user}`,
    'ignore_startup_parameters = extra_float_digits',
  ].join('\n');
  await writeFile(join(dir, 'pgbouncer.ini'), `${ini}\n`, { mode: 0o644 });
  await writeFile(join(dir, 'users.txt'), `"${user}" ""\n`, { mode: 0o644 });
  const asRoot = process.getuid?.() === 0;
  let stderr = '';
  const bouncer = spawn(executable, [...(asRoot ? ['-u', 'nobody'] : []), join(dir, 'pgbouncer.ini')], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  running.add(bouncer);
  bouncer.once('exit', () => running.delete(bouncer));
  bouncer.stderr?.setEncoding('utf8');
  bouncer.stderr?.on('data', (chunk: string) => {
    stderr = `${stderr}${chunk}`.slice(-4000);
  });
  const stop = async () => {
    if (bouncer.exitCode === null && bouncer.signalCode === null) {
      const exited = new Promise((resolve) => bouncer.once('exit', resolve));
      bouncer.kill('SIGKILL');
      await exited;
    }
    await rm(dir, { recursive: true, force: true });
  };
  try {
    await eventually(
      async () => {
        if (bouncer.exitCode !== null) {
          throw new Error(`pgbouncer exited (${bouncer.exitCode}): ${stderr}`);
        }
        return new Promise<true | undefined>((resolve) => {
          const socket = connect(port, '127.0.0.1');
          socket.once('connect', () => {
            socket.destroy();
            resolve(true);
          });
          socket.once('error', () => resolve(undefined));
        });
      },
      { what: 'pgbouncer to listen', timeoutMs: 15_000 },
    );
  } catch (error) {
    await stop();
    throw error;
  }
  return {
    port,
    urlFor(url) {
      const through = new URL(url);
      through.hostname = '127.0.0.1';
      through.port = String(port);
      return through.toString();
    },
    stop,
  };
}
