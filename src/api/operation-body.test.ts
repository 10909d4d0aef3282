import type { IncomingMessage } from 'node:http';
import { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { BodyReading } from './operation-body.ts';

const LIMIT = { bytes: 64 * 1024 * 1024, variable: 'OPSPAD_MAX_BODY_BYTES', advice: 'Send fewer items per call.' };

/** A body read from `chunks` as they are given (a socket hands over up to 64 KB at a time). */
function reading(chunks: readonly Buffer[]): BodyReading {
  const source = Readable.from(chunks);
  return new BodyReading(source as unknown as IncomingMessage, source, LIMIT, 'identity');
}

describe('BodyReading', () => {
  it('scans a large chunk a piece at a time, so the work between two looks at the clock stays small', async () => {
    // 20,000 ids of 9 characters: 12 bytes each with their quotes and comma, 240 KB in one chunk.
    const ids = Array.from({ length: 20_000 }, (_, i) => `id-${String(i).padStart(6, '0')}`);
    const body = Buffer.from(JSON.stringify({ action: 'create', item_ids: ids, batch_size: 10 }));
    const read = reading([body]);
    while (!read.scanner.streamingIds) {
      await read.pump();
    }
    const handedOut: (readonly unknown[])[] = [];
    for await (const chunk of read.ids()) {
      handedOut.push(chunk);
    }
    expect(handedOut.flat()).toEqual(ids);
    // A piece is 16 KB: at most 1,366 ids of 12 bytes, one more begun in the piece before.
    expect(Math.max(...handedOut.map((chunk) => chunk.length))).toBeLessThanOrEqual(1_367);
    expect((await read.finish()).fields).toEqual([
      { key: 'action', value: 'create' },
      { key: 'batch_size', value: 10 },
    ]);
  });

  it('decodes a character split across two pieces', async () => {
    // "é" is two bytes in UTF-8; padding puts its first byte last in the first 16 KB piece.
    const prefix = '{"action":"create","item_ids":["';
    const padding = 'a'.repeat(16 * 1024 - prefix.length - 1);
    const body = Buffer.from(`${prefix}${padding}é","b"]}`);
    expect(body[16 * 1024 - 1]).toBe(0xc3);
    const read = reading([body]);
    const handedOut: unknown[] = [];
    while (!read.ended) {
      await read.pump();
      handedOut.push(...read.scanner.takeIds());
    }
    expect(handedOut).toEqual([`${padding}é`, 'b']);
    expect(read.bodyError()).toBeNull();
  });
});
