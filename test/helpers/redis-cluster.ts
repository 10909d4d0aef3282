/**
 * A real Redis Cluster of three masters for a test: three `redis-server --cluster-enabled yes`
 * child processes (and, if asked, replicas of each) on spare loopback ports (each port and its
 * cluster-bus port, +10000, probed free first, so parallel runs never collide), joined by
 * `redis-cli --cluster create`, ready once every node reports `cluster_state:ok`. `killMasterOf`
 * SIGKILLs the master serving a key, for failover tests. `stop` kills the servers and removes
 * their directory; it is safe to call after a failed start, and twice.
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { eventually } from './wait.ts';

const run = promisify(execFile);

// Last resort if the test process itself goes away: never leave a cluster node running.
const running = new Set<ChildProcess>();
process.once('exit', () => {
  for (const server of running) {
    server.kill('SIGKILL');
  }
});
const BUS_OFFSET = 10_000;
const START_TIMEOUT_MS = 30_000;

export interface RedisClusterUnderTest {
  /** `127.0.0.1:<port>` of each master. */
  readonly nodes: readonly string[];
  /** Every key each master holds that starts with `prefix`, by node. */
  keysByNode(prefix: string): Promise<Map<string, string[]>>;
  /** `CLUSTER KEYSLOT key`, asked of the first node. */
  keySlot(key: string): Promise<number>;
  /** SIGKILLs the master that serves `key` now; resolves with its address once it is gone. */
  killMasterOf(key: string): Promise<string>;
  /** Resolves once a live node serves `key`'s slot as master and every live node reports `cluster_state:ok`. */
  waitForMasterOf(key: string, not: string): Promise<string>;
  stop(): Promise<void>;
}

type SlotRange = [number, number, [string, number, ...unknown[]], ...unknown[]];

/** True when `port` can be bound on loopback right now. */
function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/** `count` ports below 55536 whose cluster-bus port (+10000) is free as well. */
async function sparePorts(count: number): Promise<number[]> {
  const ports: number[] = [];
  for (let attempt = 0; attempt < 200 && ports.length < count; attempt++) {
    const port = 20_000 + Math.floor(Math.random() * 25_000);
    if (ports.includes(port) || ports.includes(port - BUS_OFFSET) || ports.includes(port + BUS_OFFSET)) {
      continue;
    }
    if ((await bindable(port)) && (await bindable(port + BUS_OFFSET))) {
      ports.push(port);
    }
  }
  if (ports.length < count) {
    throw new Error(`found only ${ports.length} of ${count} spare port pairs for the Redis Cluster`);
  }
  return ports;
}

async function scanAll(redis: Redis, prefix: string): Promise<string[]> {
  const keys: string[] = [];
  let cursor = '0';
  // Bounded: a test cluster holds at most a few thousand keys.
  for (let page = 0; page < 10_000; page++) {
    const [next, batch] = await redis.scan(cursor, 'MATCH', `${prefix.replace(/[*?[\]\\]/g, '\\$&')}*`, 'COUNT', 1000);
    keys.push(...batch);
    cursor = next;
    if (cursor === '0') {
      return keys;
    }
  }
  throw new Error('SCAN did not finish');
}

export async function startRedisCluster(
  options: { replicasPerMaster?: number; nodeTimeoutMs?: number } = {},
): Promise<RedisClusterUnderTest> {
  const replicas = options.replicasPerMaster ?? 0;
  const dir = await mkdtemp(join(tmpdir(), 'opspad-cluster-'));
  const servers: ChildProcess[] = [];
  const clients: Redis[] = [];
  let stopped = false;
  const stop = async () => {
    if (stopped) {
      return;
    }
    stopped = true;
    for (const client of clients) {
      client.disconnect();
    }
    await Promise.all(
      servers.map(async (server) => {
        if (server.exitCode === null && server.signalCode === null) {
          const exited = new Promise((resolve) => server.once('exit', resolve));
          server.kill('SIGKILL');
          await exited;
        }
      }),
    );
    await rm(dir, { recursive: true, force: true });
  };
  try {
    const ports = await sparePorts(3 * (1 + replicas));
    for (const port of ports) {
      // biome-ignore format: one flag and its value per line reads best
      const server = spawn('redis-server', [
        '--port', String(port),
        '--bind', '127.0.0.1',
        '--cluster-enabled', 'yes',
        '--cluster-config-file', join(dir, `nodes-${port}.conf`),
        '--dir', dir,
        '--save', '',
        '--appendonly', 'no',
        '--daemonize', 'no',
        ...(options.nodeTimeoutMs ? ['--cluster-node-timeout', String(options.nodeTimeoutMs)] : []),
        // A replica takes over however long it lost sight of its master: on a loaded machine a
        // one-second node timeout would otherwise leave its data "too old" to be elected.
        '--cluster-replica-validity-factor', '0',
      ], { stdio: 'ignore' });
      servers.push(server);
      running.add(server);
      server.once('exit', () => running.delete(server));
      const client = new Redis(port, '127.0.0.1', {
        lazyConnect: true,
        maxRetriesPerRequest: 0,
        retryStrategy: () => 50,
      });
      client.on('error', () => {});
      clients.push(client);
    }
    for (const [index, client] of clients.entries()) {
      await eventually(async () => ((await client.ping().catch(() => undefined)) === 'PONG' ? true : undefined), {
        what: `cluster node ${ports[index]} to answer`,
        timeoutMs: START_TIMEOUT_MS,
      });
    }
    const nodes = ports.map((port) => `127.0.0.1:${port}`);
    await run('redis-cli', ['--cluster', 'create', ...nodes, '--cluster-replicas', String(replicas), '--cluster-yes'], {
      timeout: START_TIMEOUT_MS,
    });
    const live = () => clients.filter((_, index) => servers[index]?.exitCode === null && !servers[index]?.signalCode);
    const allOk = async (what: string) => {
      for (const client of live()) {
        await eventually(async () => ((await client.cluster('INFO')).includes('cluster_state:ok') ? true : undefined), {
          what,
          timeoutMs: START_TIMEOUT_MS,
          intervalMs: 100,
        });
      }
    };
    await allOk('every cluster node to report cluster_state:ok');
    /** The address of the master serving `key`'s slot, as `node` sees it. */
    const masterOf = async (node: Redis, key: string) => {
      const slot = Number(await node.cluster('KEYSLOT', key));
      const ranges = (await node.cluster('SLOTS')) as unknown as SlotRange[];
      const range = ranges.find(([start, end]) => slot >= start && slot <= end);
      return range ? `${range[2][0]}:${range[2][1]}` : undefined;
    };
    return {
      nodes,
      async keysByNode(prefix) {
        const found = new Map<string, string[]>();
        for (const [index, client] of clients.entries()) {
          found.set(nodes[index] as string, await scanAll(client, prefix));
        }
        return found;
      },
      async keySlot(key) {
        return Number(await (clients[0] as Redis).cluster('KEYSLOT', key));
      },
      async killMasterOf(key) {
        const master = await masterOf(live()[0] as Redis, key);
        const index = nodes.indexOf(master ?? '');
        const server = servers[index];
        if (!server) {
          throw new Error(`no node serves ${key} (master ${master})`);
        }
        const exited = new Promise((resolve) => server.once('exit', resolve));
        server.kill('SIGKILL');
        await exited;
        clients[index]?.disconnect();
        return master as string;
      },
      async waitForMasterOf(key, not) {
        const master = await eventually(
          async () => {
            const seen = await masterOf(live()[0] as Redis, key).catch(() => undefined);
            return seen && seen !== not ? seen : undefined;
          },
          // An election may fail and be retried (after twice the node timeout) on a loaded machine.
          { what: `a replica to take over ${key} from ${not}`, timeoutMs: 2 * START_TIMEOUT_MS, intervalMs: 100 },
        );
        await allOk('the live nodes to report cluster_state:ok after the failover');
        return master;
      },
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}
