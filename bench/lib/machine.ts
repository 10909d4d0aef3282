/**
 * What the run's machine is and how fast it was: versions and settings, whether it hands memory
 * back to its host, and two fixed pieces of work timed at the start and the end of the run. The
 * project's machine is a shared virtual machine whose speed has varied by more than 2× from one
 * day to the next (docs/performance.md): the ratios of a run hold, its absolute
 * figures are read against these.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { performance } from 'node:perf_hooks';
import { Redis } from 'ioredis';
import type { BenchContext } from './common.ts';

/** Bytes hashed by the CPU reference. */
const HASHED_MB = 64;
/** Memory the cost of fresh pages is measured over. */
const TOUCHED_MB = 256;

export async function describeMachine(ctx: BenchContext) {
  const [pgVersion] = await ctx.db.query<{ version: string }>('SELECT version()');
  const settings = await ctx.db.query<{ name: string; setting: string }>(
    `SELECT name, setting FROM pg_settings WHERE name IN ('fsync', 'synchronous_commit', 'shared_buffers', 'autovacuum')`,
  );
  const redis = new Redis(ctx.redisUrl, { maxRetriesPerRequest: 1 });
  const info = await redis.info('server');
  redis.disconnect();
  const cpu = cpus();
  return {
    cpus: `${cpu.length} × ${cpu[0]?.model.trim() ?? 'unknown'}`,
    memory_gb: Math.round(totalmem() / 2 ** 30),
    node: process.version,
    postgres: pgVersion?.version.split(' on ')[0],
    postgres_settings: Object.fromEntries(settings.map((s) => [s.name, s.setting])),
    redis: /redis_version:(\S+)/.exec(info)?.[1],
    memory_reclaim: memoryReclaim(),
  };
}

/** How fast the machine was at one moment (see measureSpeed). */
export interface MachineSpeed {
  /** Milliseconds for SHA-256 over HASHED_MB of memory, one thread: the CPU's speed. */
  sha256_64mb_ms: number;
  /** Seconds per GB to touch memory this process has not used before (freshMemorySecondsPerGb). */
  fresh_memory_s_per_gb: number;
}

/** The CPU's speed and the cost of fresh memory, now. */
export function measureSpeed(): MachineSpeed {
  const data = Buffer.alloc(HASHED_MB * 2 ** 20, 7);
  const start = performance.now();
  createHash('sha256').update(data).digest();
  const hashMs = performance.now() - start;
  return {
    sha256_64mb_ms: Math.round(hashMs * 10) / 10,
    fresh_memory_s_per_gb: Math.round(freshMemorySecondsPerGb() * 100) / 100,
  };
}

/**
 * Seconds per GB this process takes to touch memory it has not used before: the kernel's page
 * faults, plus whatever the host charges for backing pages it was handed back. A create's new
 * heap, index and WAL pages go through the same kind of fresh memory in the page cache.
 */
export function freshMemorySecondsPerGb(): number {
  const start = performance.now();
  const pages = new Uint8Array(TOUCHED_MB * 2 ** 20);
  for (let i = 0; i < pages.length; i += 4096) {
    pages[i] = 1;
  }
  return (performance.now() - start) / 1000 / (TOUCHED_MB / 1024);
}

/**
 * Whether this machine hands memory back to its host: free page reporting (a virtual machine's
 * kernel returning free pages) and a DAMON `pageout` scheme. A file that grows (a create's new
 * heap and index pages) then takes memory the host must back again, which has cost the create
 * up to about a second on the project's machine (docs/performance.md, "What limits
 * each figure").
 */
function memoryReclaim(): string {
  const read = (path: string) => {
    try {
      return readFileSync(path, 'utf8').trim();
    } catch {
      return '';
    }
  };
  const parts: string[] = [];
  if (/page_reporting\./.test(read('/proc/cmdline'))) {
    parts.push('free page reporting');
  }
  const damon = '/sys/kernel/mm/damon/admin/kdamonds/0';
  if (read(`${damon}/state`) === 'on' && read(`${damon}/contexts/0/schemes/0/action`) === 'pageout') {
    parts.push('DAMON pageout');
  }
  return parts.length > 0 ? parts.join(', ') : 'none seen';
}
