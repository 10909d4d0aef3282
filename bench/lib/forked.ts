/**
 * A helper process of the bench (a peer's worker, a webhook receiver), forked with the bench's own
 * flags so it loads TypeScript, and driven over IPC: `call(op, args)` asks it to do something and
 * resolves with its answer; what it reports unasked (`emit` on its side) goes to `onEvent`.
 * The child side is `serve` (forked-child.ts).
 */
import { type ChildProcess, fork } from 'node:child_process';
import { gracefulStop } from './child.ts';
import type { BenchContext } from './common.ts';

export interface Forked {
  pid: number;
  call<T = unknown>(op: string, args?: Record<string, unknown>): Promise<T>;
  /** Events the child emits; one listener. */
  onEvent(listener: (event: Record<string, unknown>) => void): void;
  /** Asks the child to exit (SIGTERM), SIGKILL after 20 s. */
  stop(): Promise<void>;
  /** Settles when the child exits, with its exit code or signal. */
  exited: Promise<string>;
}

interface Reply {
  id: number;
  result?: unknown;
  error?: string;
}

/** Forks `script` with `env` added to the bench's environment; resolves once it says it is ready. */
export async function forkChild(ctx: BenchContext, script: string, env: Record<string, string>): Promise<Forked> {
  const child: ChildProcess = fork(script, [], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const pending = new Map<number, { resolve(value: unknown): void; reject(error: Error): void }>();
  let listener: (event: Record<string, unknown>) => void = () => {};
  let exitedWith: string | undefined;
  let ready: () => void = () => {};
  const exited = new Promise<string>((resolve) =>
    child.once('exit', (code, signal) => resolve(String(code ?? signal))),
  );
  const readyOrExit = new Promise<void>((resolve, reject) => {
    ready = resolve;
    child.once('exit', (code, signal) => {
      exitedWith = String(code ?? signal);
      const error = new Error(`${script} exited (${exitedWith})`);
      reject(error);
      for (const waiting of pending.values()) {
        waiting.reject(error);
      }
      pending.clear();
    });
  });
  readyOrExit.catch(() => {}); // a later call reports the exit
  child.on('message', (message: Reply | { event: Record<string, unknown> } | 'ready') => {
    if (message === 'ready') {
      ready();
    } else if ('event' in message) {
      listener(message.event);
    } else {
      const waiting = pending.get(message.id);
      pending.delete(message.id);
      if (message.error !== undefined) {
        waiting?.reject(new Error(message.error));
      } else {
        waiting?.resolve(message.result);
      }
    }
  });
  await readyOrExit;
  let next = 0;
  const stop = gracefulStop(child);
  ctx.defer(stop);
  return {
    pid: child.pid as number,
    call<T>(op: string, args: Record<string, unknown> = {}) {
      if (exitedWith !== undefined) {
        return Promise.reject(new Error(`${script} exited (${exitedWith})`));
      }
      const id = next++;
      return new Promise<T>((resolve, reject) => {
        pending.set(id, { resolve: resolve as (value: unknown) => void, reject });
        child.send({ id, op, args });
      });
    },
    onEvent(handler) {
      listener = handler;
    },
    stop,
    exited,
  };
}
