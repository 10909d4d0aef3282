/**
 * A private redis-server on a spare loopback port — never the machine's shared one — for tests
 * that restart Redis or count the connections it receives.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { Redis } from 'ioredis';
import { freePort } from './stdout-readers.ts';
import { eventually } from './wait.ts';

export interface PrivateRedis {
  url: string;
  stop(): Promise<void>;
  start(): Promise<void>;
  /** `total_connections_received` of INFO stats, read on a connection of its own opened once. */
  connectionsReceived(): Promise<number>;
}

/** Starts one; `stop` kills it (register it with the test's cleanup). */
export async function startPrivateRedis(): Promise<PrivateRedis> {
  const port = await freePort();
  let server: ChildProcess | undefined;
  let observer: Redis | undefined;
  const start = async () => {
    server = spawn(
      'redis-server',
      ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
      {
        stdio: 'ignore',
      },
    );
    const probe = new Redis(port, '127.0.0.1', { lazyConnect: true, retryStrategy: () => 50, maxRetriesPerRequest: 0 });
    probe.on('error', () => {});
    await eventually(async () => ((await probe.ping().catch(() => undefined)) === 'PONG' ? true : undefined), {
      what: 'the private redis-server',
      timeoutMs: 10_000,
    });
    probe.disconnect();
  };
  const stop = async () => {
    observer?.disconnect();
    observer = undefined;
    const running = server;
    if (running && running.exitCode === null) {
      const exited = new Promise((resolve) => running.once('exit', resolve));
      running.kill('SIGKILL');
      await exited;
    }
  };
  await start();
  return {
    url: `redis://127.0.0.1:${port}`,
    stop,
    start,
    async connectionsReceived() {
      observer ??= new Redis(port, '127.0.0.1', { maxRetriesPerRequest: 1 });
      const info = await observer.info('stats');
      return Number(/total_connections_received:(\d+)/.exec(info)?.[1] ?? Number.NaN);
    },
  };
}
