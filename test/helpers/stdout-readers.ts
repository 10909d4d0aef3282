/**
 * `opspad` child processes whose stdout reader misbehaves as log readers do: it reads the first
 * line, then either stays alive without reading another byte (a stalled log shipper: the pipe
 * fills up) or goes away (a `| head -1`: writes then fail with EPIPE).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import { type Exit, NODE_FLAGS } from './processes.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const BIN = fileURLToPath(new URL('../../bin/opspad.js', import.meta.url));
export const LIFECYCLE_HANDLERS = fileURLToPath(new URL('../fixtures/lifecycle-handlers.ts', import.meta.url));

export type StdoutReader = 'stalls' | 'exits';

export interface ReadOnce {
  readonly name: string;
  readonly process: ChildProcess;
  /** The one line the reader took. */
  readonly firstLine: Promise<string>;
  stderr(): string;
  readonly exited: Promise<Exit>;
}

const running = new Set<ReadOnce>();

/** Spawns `opspad <args>` whose stdout reader takes one line, then `reader`s. */
export function spawnReadOnce(name: string, args: string[], env: Record<string, string>, reader: StdoutReader) {
  const inherited = Object.fromEntries(
    Object.entries(process.env).filter(
      ([key]) => !key.startsWith('OPSPAD_') && !['DATABASE_URL', 'REDIS_URL', 'PORT', 'HOST'].includes(key),
    ),
  );
  const child = spawn(process.execPath, [...NODE_FLAGS, BIN, ...args], {
    cwd: ROOT,
    env: { ...inherited, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr?.setEncoding('utf8');
  child.stderr?.on('data', (chunk: string) => {
    stderr += chunk;
  });
  const stdout = child.stdout as NonNullable<ChildProcess['stdout']>;
  const firstLine = new Promise<string>((resolve, reject) => {
    let buffered = '';
    const onData = (chunk: Buffer) => {
      buffered += chunk.toString('utf8');
      const end = buffered.indexOf('\n');
      if (end < 0) {
        return;
      }
      stdout.off('data', onData);
      if (reader === 'stalls') {
        // Paused with no listener: the stream stops reading once its own small buffer is
        // full, and the kernel pipe behind it fills up. The process stays alive, reading nothing.
        stdout.pause();
      } else {
        stdout.destroy();
      }
      resolve(buffered.slice(0, end));
    };
    stdout.on('data', onData);
    child.once('exit', (code, signal) =>
      reject(new Error(`${name} exited (${code ?? signal}) before its first line; stderr: ${stderr.slice(-2000)}`)),
    );
  });
  firstLine.catch(() => {}); // awaited by the test; an early exit is reported there
  const exited = new Promise<Exit>((resolve) => {
    child.once('exit', (code, signal) => resolve({ code, signal }));
  });
  const spawned: ReadOnce = { name, process: child, firstLine, stderr: () => stderr, exited };
  running.add(spawned);
  return spawned;
}

/** SIGKILLs every child still running (and lets go of their stdout). */
export async function killReadOnceChildren(): Promise<void> {
  const all = [...running];
  running.clear();
  await Promise.all(
    all.map(async (child) => {
      if (child.process.exitCode === null && child.process.signalCode === null) {
        child.process.kill('SIGKILL');
        await child.exited;
      }
      child.process.stdout?.destroy();
    }),
  );
}

/** A TCP port nothing listens on right now (for a child's PORT). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}
