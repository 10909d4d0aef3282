/**
 * How long one reorganization holds the event loop, at the largest pad the limits allow
 * (OPSPAD_MAX_SCRATCHPAD_BYTES, at most 20,000 entries a section). Everything else a process
 * serves — requests, /healthz, a worker's lease renewals — waits while it holds it: reorganizing
 * a pad of 40,000 entries once blocked it for 3.9 s.
 *
 * Each pad is written, then reorganized by the built-in reorganizer (read, compact, validate,
 * save) in this process while `monitorEventLoopDelay` samples the loop every millisecond. Three
 * pad shapes: the most entries (tiny goals and open items), wordy open items, and facts that all
 * share their words (the most near-duplicate candidates). After one unmeasured warm-up, each is
 * reorganized three times; the figure is the worst shape's median longest delay. Other
 * processes on the machine (and the garbage collector) add their own delays to it.
 */
import { randomUUID } from 'node:crypto';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { RECITE_MAX_CHARS_DEFAULT } from '../../src/domain/recitation.ts';
import { emptyPad, MAX_PAD_ENTRIES, type Pad, type PadItem } from '../../src/domain/scratchpad.ts';
import { DEFAULT_SIZE_LIMITS } from '../../src/domain/size-limits.ts';
import { createLogger } from '../../src/logger.ts';
import { builtinReorganizer } from '../../src/reorganizer/providers.ts';
import { reorganizeScratchpad } from '../../src/reorganizer/reorganize.ts';
import { writePad } from '../../src/store/index.ts';
import { type BenchContext, type Entry, median, round } from '../lib/common.ts';

type Section = 'goals' | 'open_items' | 'facts';

/** A pad filled with `entry(i)` until the next one would pass the byte limit or a section's cap. */
function largestPad(entry: (i: number) => { section: Section; item: PadItem }, maxBytes: number): Pad {
  const pad: Pad = { ...emptyPad(), refs: [{ id: 'crm:search', kind: 'tool_call', label: 'contacts search' }] };
  let bytes = Buffer.byteLength(JSON.stringify(pad));
  for (let i = 0; ; i++) {
    const { section, item } = entry(i);
    const cost = Buffer.byteLength(JSON.stringify(item)) + 1;
    if (bytes + cost > maxBytes || pad[section].length >= MAX_PAD_ENTRIES) {
      return pad;
    }
    pad[section].push(item as never);
    bytes += cost;
  }
}

const SHAPES: Record<string, (i: number) => { section: Section; item: PadItem }> = {
  tiny_goals_and_open_items: (i) =>
    i % 2 === 0 ? { section: 'goals', item: { text: `g${i}` } } : { section: 'open_items', item: { text: `o${i}` } },
  wordy_open_items: (i) => ({
    section: 'open_items',
    item: { text: `check the reply of contact ${i} about the follow-up sent on day ${i % 30}` },
  }),
  facts_sharing_words: (i) => ({
    section: 'facts',
    item: { text: `contact ${i % 400} has tag ${i % 50} and status ${i % 7}`, source_ref: 'crm:search' },
  }),
};

/** Writes `pad` in a new conversation and reorganizes it; the longest event-loop delays of each. */
async function writeAndReorganize(ctx: BenchContext, organizationId: string, pad: Pad, maxBytes: number) {
  const deps = {
    db: ctx.db,
    reorganizer: builtinReorganizer,
    reciteBudget: RECITE_MAX_CHARS_DEFAULT,
    logger: createLogger('silent'),
    sizeLimits: DEFAULT_SIZE_LIMITS,
  };
  const scope = { organizationId, conversationId: randomUUID() };
  const histogram = monitorEventLoopDelay({ resolution: 1 });
  histogram.enable();
  await writePad(ctx.db, scope, {
    build: () => pad,
    source: 'api',
    reason: 'bench',
    reciteBudget: RECITE_MAX_CHARS_DEFAULT,
    maxBytes,
  });
  histogram.disable();
  const writeMs = histogram.max / 1e6;
  histogram.reset();
  histogram.enable();
  const started = performance.now();
  const outcome = await reorganizeScratchpad(deps, scope, { reason: 'bench' });
  const tookMs = performance.now() - started;
  histogram.disable();
  if (outcome.status !== 'reorganized') {
    throw new Error(`reorganizing a pad: ${outcome.status} ${outcome.error ?? ''}`);
  }
  const after = outcome.after_counts;
  const kept = (after?.goals ?? 0) + (after?.open_items ?? 0) + (after?.facts ?? 0);
  return { writeMs, blockMs: histogram.max / 1e6, tookMs, kept };
}

/** Reorganizations of each shape; the median of their longest blocks is reported per shape. */
const RUNS = 3;

export async function benchEventLoop(ctx: BenchContext, organizationId: string): Promise<Entry[]> {
  const maxBytes = DEFAULT_SIZE_LIMITS.scratchpadBytes;
  const pads = Object.entries(SHAPES).map(([name, shape]) => ({ name, pad: largestPad(shape, maxBytes) }));
  // A server that has run for a while has its code compiled: warm up once, unmeasured.
  for (const { pad } of pads) {
    await writeAndReorganize(ctx, organizationId, pad, maxBytes);
  }
  const notes: string[] = [];
  let worst = 0;
  let worstWrite = 0;
  for (const { name, pad } of pads) {
    const entries = pad.goals.length + pad.open_items.length + pad.facts.length;
    const runs = [];
    for (let i = 0; i < RUNS; i++) {
      runs.push(await writeAndReorganize(ctx, organizationId, pad, maxBytes));
    }
    const blockMs = median(runs.map((r) => r.blockMs));
    const tookMs = median(runs.map((r) => r.tookMs));
    const writeMs = median(runs.map((r) => r.writeMs));
    worst = Math.max(worst, blockMs);
    worstWrite = Math.max(worstWrite, writeMs);
    notes.push(
      `${name}: ${entries} entries → ${runs[0]?.kept} in ${round(tookMs)} ms, longest block ${round(blockMs)} ms (runs: ${runs.map((r) => round(r.blockMs)).join(', ')})`,
    );
    ctx.log(
      `reorganize the largest ${name} pad (${entries} entries, ${maxBytes} bytes): ${round(tookMs)} ms, longest event-loop block ${round(blockMs)} ms (median of ${RUNS}; its write: ${round(writeMs)} ms)`,
    );
  }
  return [
    {
      name: 'event_loop_max_block_ms',
      value: round(worst),
      unit: 'ms',
      n: pads.length * RUNS,
      note: `longest event-loop delay while reorganizing the largest pads the limits allow (${maxBytes} bytes), median of ${RUNS} runs per shape, worst shape; ${notes.join('; ')}; writing them: ${round(worstWrite)} ms at most`,
    },
  ];
}
