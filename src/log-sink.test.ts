/**
 * The stdout sink against a real Writable whose reader can stop taking data (it holds each
 * chunk until released) or go away (EPIPE): writes never throw or wait, the queue stays under
 * its cap, dropped lines are counted and reported once the reader is back.
 */
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createLogSink } from './log-sink.ts';

/** A stdout whose reader takes every chunk at once, or holds them while `stalled`. */
function output(options: { highWaterMark?: number } = {}) {
  const taken: string[] = [];
  const held: (() => void)[] = [];
  let stalled = false;
  const stream = new Writable({
    highWaterMark: options.highWaterMark ?? 16 * 1024,
    decodeStrings: false,
    write(chunk: string, _encoding, callback) {
      const take = () => {
        taken.push(chunk);
        callback();
      };
      if (stalled) {
        held.push(take);
      } else {
        take();
      }
    },
  });
  return {
    stream,
    taken,
    stall() {
      stalled = true;
    },
    resume() {
      stalled = false;
      for (const take of held.splice(0)) {
        take();
      }
    },
  };
}

const line = (n: number, size = 100) => `${JSON.stringify({ n, pad: 'x'.repeat(size) })}\n`;

describe('the log sink', () => {
  it('passes every line through while the reader keeps up', () => {
    const out = output();
    const sink = createLogSink(out.stream, { maxQueuedBytes: 1000 });
    for (let n = 0; n < 100; n++) {
      sink.write(line(n));
    }
    expect(out.taken).toHaveLength(100);
    expect(sink.droppedLines).toBe(0);
  });

  it('caps what waits for a stalled reader, counts the rest, and says so once', () => {
    const out = output({ highWaterMark: 100 });
    const notices: string[] = [];
    const sink = createLogSink(out.stream, { maxQueuedBytes: 2000, notice: (m) => notices.push(m) });
    out.stall();
    for (let n = 0; n < 500; n++) {
      sink.write(line(n));
    }
    expect(sink.queuedBytes).toBeLessThanOrEqual(2000);
    expect(sink.queuedBytes).toBeGreaterThan(0);
    const queuedLines = Math.floor(2000 / line(0).length);
    expect(sink.droppedLines).toBe(500 - queuedLines);
    expect(notices).toHaveLength(1);
    expect(notices[0]).toContain('stdout is not being read');
  });

  it('writes one line saying how many were dropped once the reader drains the queue', async () => {
    const out = output({ highWaterMark: 100 });
    const sink = createLogSink(out.stream, { maxQueuedBytes: 2000 });
    out.stall();
    for (let n = 0; n < 50; n++) {
      sink.write(line(n));
    }
    const dropped = sink.droppedLines;
    expect(dropped).toBeGreaterThan(0);
    const drained = new Promise((resolve) => out.stream.once('drain', resolve));
    out.resume();
    await drained;
    sink.write(line(999));
    const gap = out.taken.map((text) => JSON.parse(text) as Record<string, unknown>).find((l) => 'dropped_lines' in l);
    expect(gap).toMatchObject({ level: 40, dropped_lines: dropped, name: 'opspad' });
    expect(out.taken.at(-1)).toBe(line(999));
    // The lines queued before the stall were all written, in order, before the gap line.
    const written = out.taken.slice(0, -2).map((text) => (JSON.parse(text) as { n: number }).n);
    expect(written).toEqual(written.slice().sort((a, b) => a - b));
  });

  it('drops (and counts) every line once stdout is closed, without throwing', async () => {
    const notices: string[] = [];
    const stream = new Writable({
      write(_chunk, _encoding, callback) {
        callback(Object.assign(new Error('write EPIPE'), { code: 'EPIPE' }));
      },
    });
    const sink = createLogSink(stream, { notice: (m) => notices.push(m) });
    sink.write(line(0));
    await new Promise((resolve) => setImmediate(resolve));
    for (let n = 1; n <= 10; n++) {
      expect(() => sink.write(line(n))).not.toThrow();
    }
    expect(sink.droppedLines).toBe(10);
    expect(notices).toEqual([expect.stringContaining('stdout is closed (EPIPE)')]);
    expect(await sink.flush(1000)).toBe(true);
  });

  it('flush waits for a reader that takes the queue, and gives up on one that takes nothing', async () => {
    const out = output({ highWaterMark: 100 });
    const sink = createLogSink(out.stream);
    out.stall();
    sink.write(line(1));
    sink.write(line(2));
    const flushed = sink.flush(30_000);
    setImmediate(() => out.resume());
    expect(await flushed).toBe(true);
    expect(out.taken).toEqual([line(1), line(2)]);

    out.stall();
    sink.write(line(3));
    // Nothing is taken: flush gives up (after a second without progress), long before 30 s.
    expect(await sink.flush(30_000)).toBe(false);
    expect(sink.queuedBytes).toBe(line(3).length);
  });
});
