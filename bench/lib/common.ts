/**
 * What every scenario shares: the run's plan (full or quick sizes), its fresh database and queue
 * prefix, the entries it reports, and small measuring helpers.
 */
import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import type { OpspadDatabase } from '../../src/store/index.ts';
import { eventually } from '../../test/helpers/wait.ts';

/** One line of the table and of bench/results/latest.json. */
export interface Entry {
  name: string;
  value: number;
  unit: string;
  /** The scenario this one is compared with, and value / baseline value. */
  baseline?: string;
  ratio?: number;
  /** Items, operations or requests the figure was measured over. */
  n?: number;
  /** What else a reader needs to read the figure (extra measurements, conditions). */
  note?: string;
  /** Filled by the report: the target this entry is checked against, and whether it is met. */
  target?: string;
  pass?: boolean;
}

/** Sizes and durations of a run. `quick` scales everything down to about a minute. */
export interface Plan {
  quick: boolean;
  /** The longest a wait for workers may take before the scenario fails. */
  waitLimitMs: number;
  /** The longest the whole run may take before it stops, cleans up and fails. */
  runLimitMs: number;
  /** Repetitions of each throughput measurement; the median is reported. */
  repeats: number;
  bullmqJobs: number;
  bullmqBatchJobs: number;
  ceilingItems: Record<number, number>;
  backgroundItems: Record<number, number>;
  recordSamples: number;
  updateSizes: number[];
  updateSamples: number;
  createItems: number;
  workerItems: number;
  contextOperations: number;
  contextFacts: number;
  renderSamples: number;
  httpConversations: number;
  httpSeconds: number;
  /** Items of each peer run at batch 10, 100 and 1,000 (peers/peers.ts). */
  peerItems: number;
  /** Items (one job each) of each peer run of a job per item. */
  peerPerItemItems: number;
  /** Items through the demo handler at 100 ms a batch (shapes/io-bound.ts). */
  ioBoundItems: number;
  /** Items through the webhook handler (shapes/webhook.ts). */
  webhookItems: number;
  /** Many small operations created over HTTP at once (shapes/many-ops.ts). */
  manyOps: { operations: number; itemsPerOperation: number; organizations: number; clients: number };
  /** The operation of the scale group (scale.ts): 10,000,000 ids in a full run. */
  scaleItems: number;
  /** Items of the operation whose results file is downloaded (results-export.ts). */
  exportItems: number;
}

export const FULL_PLAN: Plan = {
  quick: false,
  waitLimitMs: 600_000,
  runLimitMs: 4 * 60 * 60_000,
  repeats: 3,
  bullmqJobs: 30_000,
  bullmqBatchJobs: 2_000,
  ceilingItems: { 10: 20_000, 100: 100_000, 1000: 300_000 },
  backgroundItems: { 10: 20_000, 100: 100_000, 1000: 300_000 },
  recordSamples: 60,
  updateSizes: [1_000, 10_000, 100_000, 1_000_000],
  updateSamples: 30,
  createItems: 1_000_000,
  workerItems: 1_000_000,
  contextOperations: 1_000,
  // About 210 KB with its open items and refs: within OPSPAD_MAX_SCRATCHPAD_BYTES (256 KiB).
  contextFacts: 2_000,
  renderSamples: 100,
  httpConversations: 50,
  httpSeconds: 30,
  peerItems: 100_000,
  peerPerItemItems: 100_000,
  ioBoundItems: 200_000,
  webhookItems: 100_000,
  manyOps: { operations: 10_000, itemsPerOperation: 20, organizations: 100, clients: 50 },
  scaleItems: 10_000_000,
  exportItems: 1_000_000,
};

export const QUICK_PLAN: Plan = {
  quick: true,
  waitLimitMs: 120_000,
  runLimitMs: 15 * 60_000,
  repeats: 1,
  bullmqJobs: 8_000,
  bullmqBatchJobs: 300,
  ceilingItems: { 10: 3_000, 100: 20_000, 1000: 100_000 },
  backgroundItems: { 10: 3_000, 100: 20_000, 1000: 100_000 },
  recordSamples: 20,
  updateSizes: [1_000, 10_000],
  updateSamples: 15,
  createItems: 1_000_000,
  workerItems: 150_000,
  contextOperations: 1_000,
  contextFacts: 2_000,
  renderSamples: 30,
  httpConversations: 50,
  httpSeconds: 5,
  peerItems: 10_000,
  peerPerItemItems: 1_000,
  ioBoundItems: 10_000,
  webhookItems: 10_000,
  manyOps: { operations: 300, itemsPerOperation: 20, organizations: 20, clients: 10 },
  scaleItems: 100_000,
  exportItems: 100_000,
};

export interface BenchContext {
  plan: Plan;
  /** The run's own database (created for the run, dropped at the end). */
  databaseUrl: string;
  db: OpspadDatabase;
  redisUrl: string;
  /** The run's own BullMQ prefix; every key under it is deleted at the end. */
  prefix: string;
  /** Extra node flags for the opspad processes the bench starts (e.g. --cpu-prof). */
  childNodeFlags: string[];
  log(message: string): void;
  /** Registers cleanup that must run even when the run fails (children, connections). */
  defer(cleanup: () => Promise<void> | void): void;
  /**
   * Called just before and just after the timed part of a throughput run (the floor, opspad's
   * worker processes, the peers), outside the clock, with the run's item count after: `--cpu`
   * (cpu-split.ts) reads what each process spent around it. Absent otherwise.
   */
  probe?: { before(label: string): Promise<void>; after(label: string, items: number): Promise<void> };
}

export function median(values: readonly number[]): number {
  if (values.length === 0) {
    return Number.NaN;
  }
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1
    ? (sorted[mid] as number)
    : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

/** The p-th percentile (0..100) by nearest rank. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) {
    return Number.NaN;
  }
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank] as number;
}

/** Runs `fn` and returns its result and how long it took, in milliseconds. */
export async function timed<T>(fn: () => Promise<T>): Promise<{ result: T; ms: number }> {
  const start = performance.now();
  const result = await fn();
  return { result, ms: performance.now() - start };
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

let waitLimitMs = 600_000;

/** The longest any wait of the run may take (the plan's waitLimitMs), set once at its start. */
export function setWaitLimit(ms: number): void {
  waitLimitMs = ms;
}

/** Polls `check` every `everyMs` until it returns a value, or fails after `timeoutMs`. */
export function waitFor<T>(
  what: string,
  check: () => Promise<T | undefined>,
  { everyMs = 10, timeoutMs = waitLimitMs } = {},
): Promise<T> {
  return eventually(check, { what, intervalMs: everyMs, timeoutMs });
}

/** Item ids shaped like a CRM's (`contact-00000042`). */
export function itemIds(count: number, prefix = 'contact'): string[] {
  return Array.from({ length: count }, (_, i) => `${prefix}-${String(i).padStart(8, '0')}`);
}

/** Resident set size of a process, in MB, from /proc (Linux). Its peak so far with `peak`. */
export function rssMb(pid: number, field: 'VmRSS' | 'VmHWM' = 'VmRSS'): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const match = new RegExp(`${field}:\\s+(\\d+) kB`).exec(status);
  return match ? Number(match[1]) / 1024 : Number.NaN;
}

/** Samples a process's RSS every `everyMs` until stopped; reports the peak it saw. */
export function sampleRss(pid: number, everyMs = 50) {
  let peak = 0;
  let samples = 0;
  const read = () => {
    try {
      peak = Math.max(peak, rssMb(pid));
      samples++;
    } catch {
      // The process has exited: nothing more to sample.
    }
  };
  read();
  const timer = setInterval(read, everyMs);
  return {
    /** Peak RSS seen since start (MB). */
    get peak() {
      return peak;
    },
    get samples() {
      return samples;
    },
    /** Resets the peak (e.g. after start-up, to measure one phase). */
    reset() {
      peak = 0;
      read();
    },
    stop() {
      read();
      clearInterval(timer);
      return peak;
    },
  };
}

export const round = (value: number, digits = 1) => {
  const f = 10 ** digits;
  return Math.round(value * f) / f;
};
