/**
 * `/healthz` asked one request after another while something else runs, from a process of its
 * own: what it measures is how long the server kept a caller waiting, not the pauses of the
 * benchmark's own heap. After the full run's in-process groups that heap is large, and its
 * mark-compact collections (30–60 ms) fell beside the create, where a probe in the same process
 * counted them as the server's.
 */
import { fork } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';

const CHILD = fileURLToPath(new URL('./healthz-probe-child.ts', import.meta.url));

export interface HealthzProbe {
  /** Ends the probing; every answer's time in milliseconds, in order. */
  stop(): Promise<number[]>;
}

/** Starts probing `url` once its process is ready (the parent's own flags load TypeScript). */
export async function startHealthzProbe(url: string): Promise<HealthzProbe> {
  const child = fork(CHILD, [url], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const exited = once(child, 'exit').then(([code]) => {
    throw new Error(`the /healthz probe's process exited with code ${code} before it answered`);
  });
  exited.catch(() => {}); // read only by a pending `next`
  // The child's next message; a child that dies first (a request refused, say) fails the run
  // instead of leaving it waiting.
  const next = async <T>(): Promise<T> => {
    const [message] = (await Promise.race([once(child, 'message'), exited])) as [T];
    return message;
  };
  await next<'ready'>();
  child.send('start');
  await next<'started'>();
  return {
    async stop() {
      child.send('stop');
      const { latencies } = await next<{ latencies: number[] }>();
      await exited.catch(() => undefined); // its exit, once the answer is in
      return latencies;
    },
  };
}
