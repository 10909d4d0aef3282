import { describe, expect, it } from 'vitest';
import { COPY_HEADER, COPY_TRAILER, compactRows, ItemRowEncoder, idsOfRows } from './item-copy-rows.ts';

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

describe('idsOfRows', () => {
  it('reads back the ids of rows written in several calls and chunks, in order', () => {
    const encoder = new ItemRowEncoder(OPERATION);
    const calls = [
      ['contact-1', 'é', '名前', '😀 grin'],
      Array.from({ length: 20_000 }, (_, i) => `${i % 5 === 0 ? 'ü' : 'u'}-${'x'.repeat(i % 30)}-${i}`),
      ['a'.repeat(512)],
    ];
    const chunks = calls.flatMap((ids, call) => [...encoder.rows(ids, call * 100_000)]);
    expect(chunks.length).toBeGreaterThan(3);
    expect(idsOfRows(chunks)).toEqual(calls.flat());
    expect(idsOfRows([])).toEqual([]);
  });
});

describe('compactRows', () => {
  it('copies a chunk that holds much more memory than its rows, and keeps a full one as it is', () => {
    // Twenty ASCII ids of 512 characters: room for three bytes a character, a third of it used.
    const [small] = [
      ...new ItemRowEncoder(OPERATION).rows(
        Array.from({ length: 20 }, () => 'a'.repeat(512)),
        0,
      ),
    ];
    const kept = compactRows(small as Buffer);
    expect(kept).not.toBe(small);
    expect(kept.equals(small as Buffer)).toBe(true);
    expect(kept.buffer.byteLength).toBe(kept.byteLength);

    const [full] = [
      ...new ItemRowEncoder(OPERATION).rows(
        Array.from({ length: 30_000 }, (_, i) => `id-${i}`),
        0,
      ),
    ];
    expect(compactRows(full as Buffer)).toBe(full);
  });
});
