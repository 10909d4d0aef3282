/**
 * A create's items as COPY rows in Postgres' binary format (operation id, ordinal, item id),
 * for both the create whose ids are in memory (item-insert.ts) and the streamed one
 * (item-copy.ts). Binary rather than text: the server reads the uuid's 16 bytes and the
 * ordinal's 4 as they are, where text had it parse both for every row (`uuid_in`, `strtol`), and
 * nothing needs escaping; encoding the rows here also costs this process less than building text.
 * Cost: O(ids), in chunks of at most 256 KB (one id longer than that gets a chunk of its size).
 */

/** The COPY statement of a create's items; its data is {@link COPY_HEADER}, rows, {@link COPY_TRAILER}. */
export const COPY_ITEMS = 'COPY assistant_operation_item (operation_id, ordinal, item_id) FROM STDIN (FORMAT binary)';

/** The binary format's signature, then flags and the header extension's length (both 0). */
export const COPY_HEADER = Buffer.concat([Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1'), Buffer.alloc(8)]);

/** The end of the data: a row of -1 fields. */
export const COPY_TRAILER = Buffer.from([0xff, 0xff]);

/** Bytes per chunk handed to the connection: a few rows per write would cost a syscall each. */
const CHUNK_BYTES = 256 * 1024;

/** A row's bytes before its ordinal: 3 fields, the uuid's length and bytes, the ordinal's length. */
const PREFIX_BYTES = 2 + 4 + 16 + 4;
/** A row's bytes but its id's: the prefix, the ordinal, the id's length. */
const ROW_BYTES = PREFIX_BYTES + 4 + 4;

/** The item table's `ordinal` is a 32-bit integer. */
const MAX_ORDINAL = 0x7fffffff;

/** Encodes the rows of one operation's items; ordinals are given by the caller. */
export class ItemRowEncoder {
  private readonly prefix = Buffer.alloc(PREFIX_BYTES);

  constructor(operationId: string) {
    const uuid = Buffer.from(operationId.replaceAll('-', ''), 'hex');
    if (uuid.length !== 16) {
      throw new Error(`not an operation id: ${JSON.stringify(operationId.slice(0, 40))}`);
    }
    this.prefix.writeInt16BE(3, 0);
    this.prefix.writeInt32BE(16, 2);
    uuid.copy(this.prefix, 6);
    this.prefix.writeInt32BE(4, 22);
  }

  /**
   * The rows of `ids`, ordinals from `firstOrdinal`, in chunks of about 256 KB. A chunk is no
   * larger than its rows can take: a streamed create calls this for every piece of a body that
   * arrives, and each chunk's buffer lives until the connection has sent it, so a body sent an id
   * at a time must not hold 256 KB per id.
   */
  *rows(ids: readonly string[], firstOrdinal: number): Generator<Buffer> {
    if (firstOrdinal + ids.length > MAX_ORDINAL + 1) {
      throw new RangeError(`ordinals past ${MAX_ORDINAL} do not fit the item table's integer column`);
    }
    // The most the rows can take: a UTF-16 code unit is at most 3 bytes of UTF-8.
    let left = 0;
    for (const id of ids) {
      left += ROW_BYTES + id.length * 3;
    }
    let chunk = Buffer.allocUnsafe(0);
    let used = 0;
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i] as string;
      const most = ROW_BYTES + id.length * 3;
      if (used + most > chunk.length) {
        if (used > 0) {
          yield chunk.subarray(0, used);
        }
        chunk = Buffer.allocUnsafe(Math.max(Math.min(CHUNK_BYTES, left), most));
        used = 0;
      }
      left -= most;
      // TypedArray#set and byte stores: Buffer#copy and #writeInt32BE cost a call each (a native
      // one for the copy), more than the bytes they move.
      chunk.set(this.prefix, used);
      putInt32(chunk, used + PREFIX_BYTES, firstOrdinal + i);
      const at = used + PREFIX_BYTES + 4;
      const bytes = writeUtf8(chunk, id, at + 4);
      putInt32(chunk, at, bytes);
      used = at + 4 + bytes;
    }
    if (used > 0) {
      yield chunk.subarray(0, used);
    }
  }
}

/** Bytes per block of {@link KeptRows}: a chunk is at most 256 KB, so at most a quarter is left unused. */
const KEPT_BLOCK_BYTES = 1024 * 1024;

/**
 * Rows kept after they were sent (a streamed create's segment, item-copy.ts), copied into blocks
 * of their own, and the ids read back from them only when needed. Copied, not the chunks kept:
 * a chunk is allocated for the most its rows could take (three bytes a character) and small ones
 * share Node's buffer pool, so keeping them held up to four times the rows' bytes when a body
 * arrived an id at a time. The blocks live outside the JavaScript heap (the collector neither
 * copies nor scans them) and are reused after `clear`.
 */
export class KeptRows {
  private readonly blocks: Buffer[] = [];
  /** Bytes used in each block, by index; blocks past `filled` are spare. */
  private readonly used: number[] = [];
  private filled = 0;
  /** Bytes kept. */
  bytes = 0;

  append(chunk: Uint8Array): void {
    let block = this.blocks[this.filled - 1];
    let at = this.used[this.filled - 1] ?? 0;
    if (block === undefined || at + chunk.length > block.length) {
      block = this.blocks[this.filled];
      if (block === undefined || chunk.length > block.length) {
        block = Buffer.allocUnsafeSlow(Math.max(KEPT_BLOCK_BYTES, chunk.length));
        this.blocks[this.filled] = block;
      }
      this.filled++;
      at = 0;
    }
    block.set(chunk, at);
    this.used[this.filled - 1] = at + chunk.length;
    this.bytes += chunk.length;
  }

  /** The item ids of the rows kept, in order. */
  ids(): string[] {
    const ids: string[] = [];
    for (let b = 0; b < this.filled; b++) {
      const block = this.blocks[b] as Buffer;
      const end = this.used[b] as number;
      for (let at = 0; at < end; ) {
        const idAt = at + PREFIX_BYTES + 4;
        const bytes = block.readInt32BE(idAt);
        ids.push(block.toString('utf8', idAt + 4, idAt + 4 + bytes));
        at = idAt + 4 + bytes;
      }
    }
    return ids;
  }

  /** Bytes of memory the blocks hold. */
  get allocated(): number {
    return this.blocks.reduce((sum, block) => sum + block.length, 0);
  }

  /** Forgets the rows; the blocks stay for the next ones. */
  clear(): void {
    this.filled = 0;
    this.used.length = 0;
    this.bytes = 0;
  }
}

/** Writes a non-negative 32-bit integer, big-endian, at `offset`. */
function putInt32(target: Buffer, offset: number, value: number): void {
  target[offset] = value >>> 24;
  target[offset + 1] = (value >>> 16) & 0xff;
  target[offset + 2] = (value >>> 8) & 0xff;
  target[offset + 3] = value & 0xff;
}

/**
 * Writes `value` as UTF-8 at `offset` and returns its length in bytes. Ids are mostly ASCII,
 * copied byte by byte: a call into `Buffer#write` per id cost more than the copy.
 */
function writeUtf8(target: Buffer, value: string, offset: number): number {
  for (let k = 0; k < value.length; k++) {
    const code = value.charCodeAt(k);
    if (code > 0x7f) {
      return target.write(value, offset, 'utf8');
    }
    target[offset + k] = code;
  }
  return value.length;
}
