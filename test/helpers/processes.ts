/**
 * Real `opspad` child processes for tests: spawned with a clean opspad environment, stdout read
 * line by line (past a full pipe the child drops log lines a test may wait for), every one tracked so a test can
 * kill them all afterwards, whatever happened.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { EventEmitter } from 'node:events';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { inject } from 'vitest';
import type { QueueBackendKind } from '../../src/config/env.ts';
import { fileDatabaseUrl } from './file-database.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const BIN = fileURLToPath(new URL('../../bin/opspad.js', import.meta.url));
export const COUNTING_HANDLER = fileURLToPath(new URL('../fixtures/counting-handler.ts', import.meta.url));

/**
 * Children run the compiled opspad (bin/opspad.js → dist/, built before the run) with tsx as a
 * loader, since the handler fixture they load through OPSPAD_HANDLERS is TypeScript: the way
 * docs/workers.md tells users with a `.ts` handler to run it.
 */
export const NODE_FLAGS = ['--import', 'tsx'];

/** Starting a child takes about a second; more on a loaded machine. */
export const START_TIMEOUT_MS = 30_000;
export const EXIT_TIMEOUT_MS = 20_000;
export const RUN_TIMEOUT_MS = 60_000;

// ---------------------------------------------------------------------------------------------
// Child processes: every one is tracked and killed after each test, whatever happened.

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface Spawned {
  readonly name: string;
  readonly process: ChildProcess;
  /** Stdout, line by line, as it arrives. */
  readonly lines: string[];
  stderr(): string;
  /** Set once the process has exited. */
  exit: Exit | undefined;
  /** Resolves on the 'exit' event. */
  readonly exited: Promise<Exit>;
  /** Resolves on the 'close' event: exited, and its stdout and stderr fully read. */
  readonly closed: Promise<Exit>;
  waitForLine(match: (line: string) => boolean, what: string, timeoutMs?: number): Promise<string>;
  waitForExit(timeoutMs?: number): Promise<Exit>;
}

export const children = new Set<Spawned>();

// Last resort if the test process itself goes away: never leave a worker running.
process.once('exit', () => {
  for (const child of children) {
    if (child.exit === undefined) {
      child.process.kill('SIGKILL');
    }
  }
});

/** Rejects after `ms` with a message naming `what`. */
export async function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** The environment of a child: the parent's, minus any opspad settings, plus `env`. */
function childEnv(env: Record<string, string>): NodeJS.ProcessEnv {
  const inherited = Object.fromEntries(
    Object.entries(process.env).filter(
      ([name]) => !name.startsWith('OPSPAD_') && !['DATABASE_URL', 'REDIS_URL', 'PORT', 'HOST'].includes(name),
    ),
  );
  return { ...inherited, ...env };
}

export function spawnOpspad(name: string, args: string[], env: Record<string, string>): Spawned {
  const child = spawn(process.execPath, [...NODE_FLAGS, BIN, ...args], {
    cwd: ROOT,
    env: childEnv(env),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: string[] = [];
  const events = new EventEmitter();
  let stderr = '';
  child.stderr?.setEncoding('utf8');
  child.stderr?.on('data', (chunk: string) => {
    stderr += chunk;
  });
  // Read stdout continuously: past a full pipe the child drops log lines (src/log-sink.ts).
  createInterface({ input: child.stdout as NodeJS.ReadableStream }).on('line', (line) => {
    lines.push(line);
    events.emit('line', line);
  });
  const exited = new Promise<Exit>((resolve) => {
    child.once('exit', (code, signal) => {
      spawned.exit = { code, signal };
      events.emit('exit', spawned.exit);
      resolve(spawned.exit);
    });
  });
  const closed = new Promise<Exit>((resolve) => {
    child.once('close', (code, signal) => resolve({ code, signal }));
  });
  const describeExit = (exit: Exit) => `exited (${exit.code ?? exit.signal}); stderr: ${stderr.slice(-2000)}`;

  const spawned: Spawned = {
    name,
    process: child,
    lines,
    stderr: () => stderr,
    exit: undefined,
    exited,
    closed,
    waitForLine(match, what, timeoutMs = START_TIMEOUT_MS) {
      return new Promise<string>((resolve, reject) => {
        const found = lines.find(match);
        if (found !== undefined) {
          resolve(found);
          return;
        }
        if (spawned.exit) {
          reject(new Error(`${name} ${describeExit(spawned.exit)} before ${what}`));
          return;
        }
        const cleanup = () => {
          clearTimeout(timer);
          events.off('line', onLine);
          events.off('exit', onExit);
        };
        const onLine = (line: string) => {
          if (match(line)) {
            cleanup();
            resolve(line);
          }
        };
        const onExit = (exit: Exit) => {
          cleanup();
          reject(new Error(`${name} ${describeExit(exit)} before ${what}`));
        };
        const timer = setTimeout(() => {
          cleanup();
          reject(
            new Error(`timed out after ${timeoutMs} ms waiting for ${name}: ${what}; stderr: ${stderr.slice(-2000)}`),
          );
        }, timeoutMs);
        events.on('line', onLine);
        events.on('exit', onExit);
      });
    },
    waitForExit(timeoutMs = EXIT_TIMEOUT_MS) {
      return within(exited, timeoutMs, `${name} to exit`);
    },
  };
  children.add(spawned);
  return spawned;
}

/** A JSON log line's `msg`, or undefined for anything else. */
export function logMessage(line: string): string | undefined {
  try {
    const parsed = JSON.parse(line) as { msg?: unknown };
    return typeof parsed.msg === 'string' ? parsed.msg : undefined;
  } catch {
    return undefined;
  }
}

export const WORKER_SETTINGS = {
  OPSPAD_LEASE_TTL: '2s',
  OPSPAD_JOB_LOCK_TTL: '1s',
  OPSPAD_RECONCILE_INTERVAL: '500ms',
  OPSPAD_LOG_LEVEL: 'info',
};

/**
 * `opspad worker` on the test file's database, its jobs under `prefix` in the run's Redis or (with
 * `queue` postgres) in Postgres with no REDIS_URL at all; resolves once it takes jobs. The
 * counting handler's side effects go to the run's Redis either way.
 */
export async function startWorker(
  name: string,
  prefix: string,
  env: Record<string, string> = {},
  queue: QueueBackendKind = 'redis',
): Promise<Spawned> {
  const worker = spawnOpspad(name, ['worker'], {
    DATABASE_URL: fileDatabaseUrl(),
    ...(queue === 'redis' ? { REDIS_URL: inject('redisUrl') } : { OPSPAD_QUEUE_BACKEND: 'postgres' }),
    SIDEFX_REDIS_URL: inject('redisUrl'),
    OPSPAD_QUEUE_PREFIX: prefix,
    OPSPAD_HANDLERS: COUNTING_HANDLER,
    ...WORKER_SETTINGS,
    ...env,
  });
  await worker.waitForLine((line) => logMessage(line) === 'workers started', "the 'workers started' log line");
  return worker;
}

/** SIGKILLs every child still running and waits for it to go. */
export async function killAllChildren(): Promise<void> {
  const running = [...children];
  children.clear();
  await Promise.all(
    running.map(async (child) => {
      if (child.exit === undefined) {
        child.process.kill('SIGKILL');
        await within(child.exited, EXIT_TIMEOUT_MS, `${child.name} to die`).catch(() => undefined);
      }
    }),
  );
}

/** How a command run to its end ended, and what it printed. */
export interface CommandRun {
  code: number | null;
  /** Only when a signal ended it. */
  signal?: NodeJS.Signals;
  stdout: string;
  stderr: string;
}

/**
 * Runs `node <args>` until it exits by itself, with nothing in its environment but PATH and
 * `env` (so no setting of this process leaks in) and stdin at EOF; past `timeoutMs` it is
 * killed and the promise rejects.
 */
export function runNode(
  args: readonly string[],
  env: Record<string, string>,
  timeoutMs = RUN_TIMEOUT_MS,
): Promise<CommandRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, {
      env: { PATH: process.env.PATH ?? '', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
    });
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`node ${args.join(' ')} did not exit within ${timeoutMs} ms`));
    }, timeoutMs);
    child.on('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, ...(signal ? { signal } : {}), stdout, stderr });
    });
  });
}

/** `opspad <args>` from the built bin, as {@link runNode} runs it. */
export function runOpspad(
  args: readonly string[],
  env: Record<string, string>,
  options: { timeoutMs?: number; nodeArgs?: readonly string[] } = {},
): Promise<CommandRun> {
  return runNode([...(options.nodeArgs ?? []), BIN, ...args], env, options.timeoutMs);
}
