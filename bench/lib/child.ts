/**
 * opspad in a process of its own, started the way an operator starts it (`node bin/opspad.js
 * start|worker` with DATABASE_URL and the rest in the environment), so its RSS is the RSS of a
 * real opspad process and nothing of the bench's own memory.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import type { BenchContext } from './common.ts';

const BIN = fileURLToPath(new URL('../../bin/opspad.js', import.meta.url));

export interface OpspadChild {
  process: ChildProcess;
  pid: number;
  /** The API's base URL (`start` only). */
  url: string | undefined;
  /** Graceful stop (SIGTERM), then SIGKILL if it takes too long. */
  stop(): Promise<void>;
}

/** The environment of an opspad process of this run. */
export function childEnv(ctx: BenchContext, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return {
    ...process.env,
    DATABASE_URL: ctx.databaseUrl,
    REDIS_URL: ctx.redisUrl,
    OPSPAD_QUEUE_PREFIX: ctx.prefix,
    OPSPAD_LOG_LEVEL: 'info',
    OPSPAD_ADMIN_PASSWORD: 'bench-admin-password',
    HOST: '127.0.0.1',
    PORT: '0',
    ...extra,
  };
}

/**
 * Starts `opspad <command>` and resolves once it logs `readyMessage` (JSON log lines on stdout).
 * Log lines of level warn and above are passed through to the bench's stderr.
 */
export async function startOpspadChild(
  ctx: BenchContext,
  command: 'start' | 'worker',
  env: Record<string, string> = {},
): Promise<OpspadChild> {
  const readyMessage = command === 'start' ? 'opspad API listening' : 'workers started';
  const child = spawn(process.execPath, [...ctx.childNodeFlags, BIN, command], {
    env: childEnv(ctx, env),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let url: string | undefined;
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-4000);
  });
  const ready = new Promise<void>((resolve, reject) => {
    let buffered = '';
    child.stdout?.on('data', (chunk: Buffer) => {
      buffered += chunk.toString();
      let newline = buffered.indexOf('\n');
      while (newline >= 0) {
        const line = buffered.slice(0, newline);
        buffered = buffered.slice(newline + 1);
        newline = buffered.indexOf('\n');
        let entry: { msg?: string; level?: number; url?: string };
        try {
          entry = JSON.parse(line);
        } catch {
          continue;
        }
        if (entry.msg === readyMessage) {
          url = entry.url;
          resolve();
        } else if ((entry.level ?? 0) >= 40) {
          process.stderr.write(`  [opspad ${command}] ${line}\n`);
        }
      }
    });
    child.once('exit', (code, signal) =>
      reject(new Error(`opspad ${command} exited (${code ?? signal}) before it was ready:\n${stderr}`)),
    );
  });
  const timeout = setTimeout(() => child.kill('SIGKILL'), 60_000);
  try {
    await ready;
  } finally {
    clearTimeout(timeout);
  }
  const stop = gracefulStop(child);
  ctx.defer(stop);
  return { process: child, pid: child.pid as number, url, stop };
}

/** Stops `child` once, however often it is called: SIGTERM, then SIGKILL after 20 s. */
export function gracefulStop(child: ChildProcess): () => Promise<void> {
  let stopping: Promise<void> | undefined;
  return () => {
    stopping ??= (async () => {
      if (child.exitCode !== null || child.signalCode !== null) {
        return;
      }
      const exited = once(child, 'exit');
      child.kill('SIGTERM');
      const killer = setTimeout(() => child.kill('SIGKILL'), 20_000);
      await exited;
      clearTimeout(killer);
    })();
    return stopping;
  };
}
