import { describe, expect, it } from 'vitest';
import { COPY_HEADER, COPY_TRAILER, ItemRowEncoder, KeptRows } from './item-copy-rows.ts';

const OPERATION = '0194e000-1234-7abc-8def-0123456789ab';

/** Reads binary COPY rows back: [operation id, ordinal, item id] each. */
function decode(data: Buffer): [string, number, string][] {
  const rows: [string, number, string][] = [];
  let at = 0;
  while (at < data.length) {
    expect(data.readInt16BE(at)).toBe(3);
    expect(data.readInt32BE(at + 2)).toBe(16);
    const hex = data.subarray(at + 6, at + 22).toString('hex');
    const uuid = `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
    expect(data.readInt32BE(at + 22)).toBe(4);
    const ordinal = data.readInt32BE(at + 26);
    const length = data.readInt32BE(at + 30);
    rows.push([uuid, ordinal, data.subarray(at + 34, at + 34 + length).toString('utf8')]);
    at += 34 + length;
  }
  return rows;
}

describe('ItemRowEncoder', () => {
  it('writes each id with its ordinal, as UTF-8, whatever its characters', () => {
    const ids = ['contact-1', 'tab\there', 'back\\slash', 'é', '名前', '😀 grin', 'a'.repeat(512), 'é'.repeat(512)];
    const chunks = [...new ItemRowEncoder(OPERATION).rows(ids, 7)];
    expect(decode(Buffer.concat(chunks))).toEqual(ids.map((id, i) => [OPERATION, 7 + i, id]));
  });

  it('cuts its output into chunks of about 256 KB at row boundaries', () => {
    const ids = Array.from({ length: 30_000 }, (_, i) => `${i % 7 === 0 ? 'ü' : 'u'}-${'x'.repeat(i % 40)}-${i}`);
    const chunks = [...new ItemRowEncoder(OPERATION).rows(ids, 0)];
    expect(chunks.length).toBeGreaterThan(3);
    for (const chunk of chunks.slice(0, -1)) {
      expect(chunk.length).toBeGreaterThan(250_000);
      expect(chunk.length).toBeLessThanOrEqual(256 * 1024);
    }
    // Each chunk holds whole rows: decoding them one by one gives every id in order.
    expect(chunks.flatMap((chunk) => decode(chunk)).map(([, , id]) => id)).toEqual(ids);
  });

  it('gives a few ids a buffer of their size, and an id longer than a chunk a chunk of its own', () => {
    const [few] = [...new ItemRowEncoder(OPERATION).rows(['a', 'bc'], 0)];
    // 77 bytes at most, from Node's shared pool of small buffers rather than 256 KB of its own.
    expect(few?.buffer.byteLength).toBeLessThanOrEqual(Buffer.poolSize);
    expect(few?.length).toBe(2 * 34 + 3);
    const long = 'ö'.repeat(100_000);
    const chunks = [...new ItemRowEncoder(OPERATION).rows(['x'.repeat(200_000), long, 'y'], 0)];
    expect(chunks.flatMap((chunk) => decode(chunk)).map(([, , id]) => id)).toEqual(['x'.repeat(200_000), long, 'y']);
  });

  it('refuses an operation id that is not a uuid', () => {
    expect(() => new ItemRowEncoder('not-a-uuid')).toThrow(/not an operation id/);
  });

  it('frames the data as Postgres expects', () => {
    expect(COPY_HEADER.toString('latin1', 0, 11)).toBe('PGCOPY\n\xff\r\n\0');
    expect(COPY_HEADER.length).toBe(19);
    expect(COPY_TRAILER.readInt16BE(0)).toBe(-1);
  });
});

describe('KeptRows', () => {
  it('gives back the ids of rows appended in several calls and chunks, in order', () => {
    const encoder = new ItemRowEncoder(OPERATION);
    const calls = [
      ['contact-1', 'é', '名前', '😀 grin'],
      Array.from({ length: 40_000 }, (_, i) => `${i % 5 === 0 ? 'ü' : 'u'}-${'x'.repeat(i % 30)}-${i}`),
      ['a'.repeat(512)],
    ];
    const kept = new KeptRows();
    let bytes = 0;
    for (const [call, ids] of calls.entries()) {
      for (const chunk of encoder.rows(ids, call * 100_000)) {
        kept.append(chunk);
        bytes += chunk.length;
      }
    }
    expect(bytes).toBeGreaterThan(1024 * 1024); // more than one block
    expect(kept.bytes).toBe(bytes);
    expect(kept.ids()).toEqual(calls.flat());

    const allocated = kept.allocated;
    kept.clear();
    expect(kept.ids()).toEqual([]);
    expect(kept.bytes).toBe(0);
    for (const chunk of encoder.rows(['again', 'and again'], 0)) {
      kept.append(chunk);
    }
    expect(kept.ids()).toEqual(['again', 'and again']);
    expect(kept.allocated).toBe(allocated); // the blocks were reused
  });

  it('keeps the bytes of rows that arrive an id at a time, not the memory they were encoded in', () => {
    // An id at a time: each call's chunk is sized for three bytes a character and comes from
    // Node's shared pool; kept as they are, 2,000 ids of 512 ASCII characters held about 3 MB.
    const encoder = new ItemRowEncoder(OPERATION);
    const kept = new KeptRows();
    for (let i = 0; i < 2_000; i++) {
      for (const chunk of encoder.rows([`${i}`.padEnd(512, 'a')], i)) {
        kept.append(chunk);
      }
    }
    expect(kept.bytes).toBe(2_000 * (34 + 512));
    expect(kept.allocated).toBe(2 * 1024 * 1024); // 1.09 MB of rows in two blocks of 1 MB
    expect(kept.ids()[1_999]).toBe('1999'.padEnd(512, 'a'));
  });
});

describe('ItemRowEncoder ordinals', () => {
  it('refuses ordinals past the item table’s 32-bit integer', () => {
    const encoder = new ItemRowEncoder(OPERATION);
    expect([...encoder.rows(['last'], 0x7fffffff)]).toHaveLength(1);
    expect(() => [...encoder.rows(['a', 'b'], 0x7fffffff)]).toThrow(RangeError);
  });
});
