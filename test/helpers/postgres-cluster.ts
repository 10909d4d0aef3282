/**
 * A Postgres cluster of a test's own (initdb, pg_ctl) on a spare loopback port, for the faults
 * that take the whole server away: an immediate shutdown (what a kernel OOM kill of the
 * postmaster looks like to clients) and a start. Postgres refuses to run as root: run as root,
 * the cluster belongs to, and is driven as, the `postgres` user.
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { createPostgresDatabase, runMigrations } from '../../src/store/index.ts';
import { freePort } from './stdout-readers.ts';

export const PG_BIN = process.env.OPSPAD_TEST_PG_BIN ?? '/usr/lib/postgresql/15/bin';
const COMMAND_TIMEOUT_MS = 60_000;

export interface PostgresCluster {
  readonly port: number;
  /** A migrated database `opspad` on the cluster. */
  readonly url: string;
  /** `pg_ctl stop -m immediate`: every backend ends at once, no checkpoint; a start recovers. */
  crash(): void;
  start(): void;
  /** Stops the server (if running) and removes its folder. */
  remove(): Promise<void>;
}

/** A port nothing listens on now, chosen by the kernel. */
export const sparePort = freePort;

function postgresUser(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) {
    return undefined;
  }
  const id = (flag: string) => Number(spawnSync('id', [flag, 'postgres'], { encoding: 'utf8' }).stdout.trim());
  return { uid: id('-u'), gid: id('-g') };
}

/** Runs a Postgres program, as `postgres` when this process is root; throws with its output. */
export function pgProgram(program: string, args: readonly string[]): string {
  const path = join(PG_BIN, program);
  if (!existsSync(path)) {
    throw new Error(`${path} does not exist: install Postgres 15 or set OPSPAD_TEST_PG_BIN to its bin folder.`);
  }
  const asRoot = process.getuid?.() === 0;
  const run = asRoot
    ? spawnSync('runuser', ['-u', 'postgres', '--', path, ...args], { encoding: 'utf8', timeout: COMMAND_TIMEOUT_MS })
    : spawnSync(path, args, { encoding: 'utf8', timeout: COMMAND_TIMEOUT_MS });
  if (run.status !== 0) {
    throw new Error(`${program} ${args.join(' ')} failed (${run.status ?? run.signal}): ${run.stdout}${run.stderr}`);
  }
  return run.stdout;
}

/** A folder the cluster's user owns, under the system's temporary folder. */
export function clusterFolder(tag: string): string {
  const folder = mkdtempSync(join(tmpdir(), `opspad-${tag}-`));
  const user = postgresUser();
  if (user) {
    chownSync(folder, user.uid, user.gid);
  }
  chmodSync(folder, 0o700);
  return folder;
}

/** `settings`: more server settings (`-c name=value`), such as a preloaded library. */
export async function startPostgresCluster(
  tag: string,
  settings: Readonly<Record<string, string>> = {},
): Promise<PostgresCluster> {
  const folder = clusterFolder(tag);
  const data = join(folder, 'data');
  const port = await sparePort();
  // The socket goes in the cluster's folder: the system's socket folder may not be writable.
  const more = Object.entries(settings).map(([name, value]) => ` -c ${name}=${value}`);
  const options = `-p ${port} -c listen_addresses=127.0.0.1 -k ${folder} -c max_connections=200${more.join('')}`;
  let running = false;
  const url = `postgresql://postgres@127.0.0.1:${port}/opspad`;
  const start = () => {
    pgProgram('pg_ctl', ['start', '-w', '-D', data, '-l', join(folder, 'server.log'), '-o', options]);
    running = true;
  };
  const stop = (mode: 'immediate' | 'fast') => {
    pgProgram('pg_ctl', ['stop', '-w', '-D', data, '-m', mode]);
    running = false;
  };
  try {
    pgProgram('initdb', ['-D', data, '-U', 'postgres', '-A', 'trust', '--no-sync', '-E', 'UTF8']);
    start();
    const admin = new pg.Client({ host: '127.0.0.1', port, user: 'postgres', database: 'postgres' });
    await admin.connect();
    await admin.query('CREATE DATABASE opspad');
    await admin.end();
    const db = createPostgresDatabase({ connectionString: url, poolSize: 1 });
    await runMigrations(db);
    await db.close();
  } catch (error) {
    if (running) {
      stop('immediate');
    }
    rmSync(folder, { recursive: true, force: true });
    throw error;
  }
  return {
    port,
    url,
    crash: () => stop('immediate'),
    start,
    async remove() {
      if (running) {
        stop('fast');
      }
      rmSync(folder, { recursive: true, force: true });
    },
  };
}
