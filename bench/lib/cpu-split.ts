/**
 * `--cpu`: where a throughput run's CPU went, per item, by process group: the Postgres backends
 * of the run's database, opspad's worker processes, the peers' worker processes, Redis and the
 * bench itself, read from /proc (Linux) just before and just after the timed part (the
 * context's probe). A figure is a system's cost, not its speed: on two shared cores, a system
 * that spends more CPU an item moves fewer items a second whatever it waits on.
 */
import { readdirSync, readFileSync } from 'node:fs';
import type { BenchContext } from './common.ts';

/** Clock ticks a second in /proc/<pid>/stat (USER_HZ, 100 on every mainstream Linux). */
const TICKS_PER_SECOND = 100;

type Group = 'postgres' | 'opspad workers' | 'peer workers' | 'redis' | 'bench' | 'other';

function groupOf(pid: number, cmdline: string, databaseName: string): Group {
  if (pid === process.pid) {
    return 'bench';
  }
  if (cmdline.startsWith('postgres: ')) {
    // A backend's title: `postgres: [<cluster name>: ]<user> <database> <client> <state>`.
    return /^postgres: (?:\S+: )?\S+ (\S+) /.exec(cmdline)?.[1] === databaseName ? 'postgres' : 'other';
  }
  if (cmdline.includes('redis-server')) {
    return 'redis';
  }
  if (/opspad\.js worker\b/.test(cmdline)) {
    return 'opspad workers';
  }
  if (/(pgboss|graphile)-child/.test(cmdline)) {
    return 'peer workers';
  }
  return 'other';
}

/** CPU seconds so far of every process, by pid, with its group. */
function cpuByProcess(databaseName: string): Map<number, { group: Group; seconds: number }> {
  const processes = new Map<number, { group: Group; seconds: number }>();
  for (const entry of readdirSync('/proc')) {
    const pid = Number(entry);
    if (!Number.isInteger(pid)) {
      continue;
    }
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      // Fields after the command's closing parenthesis; utime and stime are the 12th and 13th.
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const ticks = Number(fields[11]) + Number(fields[12]);
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ').trim();
      processes.set(pid, { group: groupOf(pid, cmdline, databaseName), seconds: ticks / TICKS_PER_SECOND });
    } catch {
      // The process ended while being read.
    }
  }
  return processes;
}

/** The probe; `log` gets one line per run: µs of CPU an item by group, and what else ran. */
export function cpuSplitProbe(databaseName: string, log: (line: string) => void): NonNullable<BenchContext['probe']> {
  let before = new Map<number, { group: Group; seconds: number }>();
  let startedAt = 0;
  return {
    async before() {
      before = cpuByProcess(databaseName);
      startedAt = performance.now();
    },
    async after(label, items) {
      const wallSeconds = (performance.now() - startedAt) / 1000;
      const spent = new Map<Group, number>();
      for (const [pid, now] of cpuByProcess(databaseName)) {
        const seconds = now.seconds - (before.get(pid)?.seconds ?? 0);
        spent.set(now.group, (spent.get(now.group) ?? 0) + Math.max(0, seconds));
      }
      const perItem = (seconds: number) => ((seconds / items) * 1e6).toFixed(1);
      const groups = [...spent].filter(([group, seconds]) => group !== 'other' && seconds > 0);
      const total = groups.reduce((sum, [, seconds]) => sum + seconds, 0);
      log(
        `cpu ${label}: ${perItem(total)} µs an item (${groups
          .sort((a, b) => b[1] - a[1])
          .map(([group, seconds]) => `${group} ${perItem(seconds)}`)
          .join(
            ', ',
          )}) over ${wallSeconds.toFixed(2)} s; other processes ${((spent.get('other') ?? 0) / wallSeconds).toFixed(2)} cores`,
      );
    },
  };
}
