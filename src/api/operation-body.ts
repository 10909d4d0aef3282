/**
 * The operation tool's body reader. Small bodies of known length go to the JSON body parser
 * (json-body.ts) as before. Larger, compressed or chunked ones are read here as they arrive:
 * decompressed, counted against OPSPAD_MAX_BODY_BYTES after decompression, decoded as strict
 * UTF-8 and scanned (item-ids-scanner.ts), in slices of at most ~10 ms between which the event
 * loop serves everyone else.
 *
 * - If the body ends with at most {@link STREAM_AFTER_IDS} ids it is parsed whole, exactly as
 *   the JSON body parser does (`req.body`), and takes the ordinary path.
 * - Past that, the request carries a {@link StreamedToolBody} instead (`streamedBodyOf`): its
 *   ids are handed out as they arrive, and the route streams them into the database.
 *
 * Errors keep the JSON body parser's order: too large (413) as soon as it is, a corrupt
 * compressed body as soon as it is found, then — only once the whole body has been read —
 * invalid UTF-8, then invalid JSON.
 */
import type { IncomingMessage } from 'node:http';
import { performance } from 'node:perf_hooks';
import type { Readable } from 'node:stream';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { createBrotliDecompress, createGunzip, createInflate } from 'node:zlib';
import type { Request, RequestHandler } from 'express';
import { AppError } from '../domain/errors.ts';
import type { StreamedBodyEnd, StreamedToolBody } from '../tools/streamed-create.ts';
import { ItemIdsScanner } from './item-ids-scanner.ts';
import {
  type BodyLimit,
  bodyTooLargeError,
  contentEncodingOf,
  corruptEncodingError,
  invalidJsonError,
  invalidUtf8Error,
} from './json-body.ts';

/** A body with more ids than this is streamed; smaller ones are parsed whole, as before. */
export const STREAM_AFTER_IDS = 10_000;
/** Bodies of known length up to this, uncompressed, go to the ordinary JSON body parser. */
const SMALL_BODY_BYTES = 1024 * 1024;
/**
 * How long a body being read here may stop arriving. A streamed create holds a database
 * connection and one of {@link STREAMS_AT_ONCE} slots while its body arrives; a client that
 * stops sending must not keep them until the server's request timeout (5 minutes).
 */
const STALL_MS = 30_000;
/** The longest slice of reading and scanning before the event loop gets a turn. */
const SLICE_MS = 10;
/**
 * The most of a chunk scanned (and its ids copied) between two looks at the clock. A socket
 * hands over up to 64 KB at a time, about 4,000 short ids; in a process's first create that
 * code is not yet optimized, and one such chunk kept the event loop for up to 40 ms.
 */
const PIECE_BYTES = 16 * 1024;
/**
 * Streamed creates at once per process: each holds a database connection for as long as its
 * body takes to arrive. A third waits without reading its body (TCP holds the client back).
 */
const STREAMS_AT_ONCE = 2;

const STALLED = Symbol('stalled');

const DECOMPRESSORS: Record<string, (() => NodeJS.ReadWriteStream) | null> = {
  identity: null,
  gzip: createGunzip,
  deflate: createInflate,
  br: createBrotliDecompress,
};

/** Whether this request's body is read here rather than by the JSON body parser. */
function readsHere(req: Request): boolean {
  if (req.method !== 'POST' || !req.is('application/json')) {
    return false; // not a JSON body: the parser leaves it alone, and so does this reader
  }
  const charset = /;\s*charset\s*=\s*"?([^";\s]+)/i.exec(req.get('content-type') ?? '')?.[1]?.toLowerCase();
  if (charset !== undefined && charset !== 'utf-8') {
    return false; // the parser's errors for other charsets
  }
  const encoding = contentEncodingOf(req);
  if (!Object.hasOwn(DECOMPRESSORS, encoding)) {
    return false; // the parser's error for an unsupported encoding
  }
  const length = Number(req.headers['content-length']);
  return !(encoding === 'identity' && req.headers['content-length'] !== undefined && length <= SMALL_BODY_BYTES);
}

/** A counting semaphore: `acquire` resolves with the function that gives the slot back. */
class Slots {
  private waiting: (() => void)[] = [];
  constructor(private free: number) {}

  async acquire(): Promise<() => void> {
    if (this.free > 0) {
      this.free--;
    } else {
      await new Promise<void>((resolve) => this.waiting.push(resolve));
    }
    let released = false;
    return () => {
      if (released) {
        return;
      }
      released = true;
      const next = this.waiting.shift();
      if (next) {
        next();
      } else {
        this.free++;
      }
    };
  }
}

const slots = new Slots(STREAMS_AT_ONCE);

/** A body being read: decompressed bytes in, scanner fed, the event loop given turns (exported for its tests). */
export class BodyReading implements StreamedToolBody {
  readonly scanner = new ItemIdsScanner();
  /** The whole text, kept while the body may still turn out small. */
  texts: string[] | null = [];
  ended = false;
  private bytes = 0;
  private utf8Invalid = false;
  private readonly decoder = new TextDecoder('utf-8', { fatal: true });
  private lastTurn = performance.now();
  private readonly chunks: AsyncIterator<Buffer>;
  /** What is left of the last chunk read, scanned a piece at a time. */
  private rest: Buffer | null = null;
  release: () => void = () => {};

  constructor(
    private readonly req: IncomingMessage,
    private readonly source: Readable | NodeJS.ReadWriteStream,
    private readonly limit: BodyLimit,
    private readonly encoding: string,
  ) {
    this.chunks = (source as AsyncIterable<Buffer>)[Symbol.asyncIterator]();
  }

  /** Scans one more piece of the body (or its end), reading a chunk when none is left. */
  async pump(): Promise<void> {
    if (this.rest === null) {
      const chunk = await this.read();
      if (chunk === null) {
        return;
      }
      this.rest = chunk;
    }
    const piece = this.rest.length > PIECE_BYTES ? this.rest.subarray(0, PIECE_BYTES) : this.rest;
    this.rest = piece === this.rest ? null : this.rest.subarray(PIECE_BYTES);
    this.decode(piece);
    if (performance.now() - this.lastTurn > SLICE_MS) {
      await nextTurn();
      this.lastTurn = performance.now();
    }
  }

  /** The next chunk of the body, counted against the limit; null at its end (the scanner ended). */
  private async read(): Promise<Buffer | null> {
    let next: IteratorResult<Buffer>;
    let stall: NodeJS.Timeout | undefined;
    try {
      next = await Promise.race([
        this.chunks.next(),
        new Promise<never>((_, reject) => {
          stall = setTimeout(() => reject(STALLED), STALL_MS);
        }),
      ]);
    } catch (error) {
      if (error === STALLED) {
        this.halt();
        throw new AppError(
          'body_stalled',
          `The request body stopped arriving: nothing came for ${STALL_MS / 1000} s. Send the body without pauses.`,
          { field: '(body)' },
        );
      }
      this.halt();
      const { errno, code } = (error ?? {}) as { errno?: unknown; code?: unknown };
      throw typeof errno === 'number' && typeof code === 'string'
        ? corruptEncodingError(this.encoding)
        : new AppError('validation_failed', 'Invalid body: (body): the body could not be read.', { field: '(body)' });
    } finally {
      clearTimeout(stall);
    }
    if (next.done) {
      this.decode(undefined);
      this.scanner.end();
      this.ended = true;
      return null;
    }
    this.bytes += next.value.length;
    if (this.bytes > this.limit.bytes) {
      this.halt();
      throw bodyTooLargeError(this.limit);
    }
    return next.value;
  }

  private decode(bytes: Buffer | undefined): void {
    if (this.utf8Invalid) {
      return; // read on to the end only for the size limit, as the parser does
    }
    let text: string;
    try {
      text = bytes ? this.decoder.decode(bytes, { stream: true }) : this.decoder.decode();
    } catch {
      this.utf8Invalid = true;
      this.texts = null;
      return;
    }
    this.texts?.push(text);
    this.scanner.write(text);
  }

  close(): void {
    this.halt();
  }

  /** Stops reading: the answer is an error, the rest of the body is not wanted. */
  halt(): void {
    this.rest = null;
    if (this.source !== this.req) {
      this.req.unpipe(this.source as NodeJS.WritableStream);
      (this.source as Readable).destroy?.();
    }
    this.req.pause();
    this.release();
  }

  /** The error the whole body gets once read, or null. */
  bodyError(): AppError | null {
    if (this.utf8Invalid) {
      return invalidUtf8Error();
    }
    return this.scanner.error === null ? null : invalidJsonError();
  }

  /** The body parsed whole, as the JSON body parser parses it. */
  parseWhole(): unknown {
    if (this.utf8Invalid) {
      throw invalidUtf8Error();
    }
    const text = (this.texts ?? []).join('');
    this.texts = null;
    if (text.length === 0) {
      return {};
    }
    // The parser's strict mode: the first character other than JSON whitespace opens an object or array.
    const first = text.trimStart().charAt(0);
    if (first !== '{' && first !== '[') {
      throw invalidJsonError();
    }
    try {
      return JSON.parse(text);
    } catch {
      throw invalidJsonError();
    }
  }

  async *ids(): AsyncGenerator<readonly unknown[]> {
    try {
      for (;;) {
        if (this.scanner.pendingIds > 0) {
          yield this.scanner.takeIds();
        } else if (this.ended || !this.scanner.readingIds || this.scanner.error !== null) {
          return;
        } else {
          await this.pump();
        }
      }
    } catch (error) {
      this.release();
      throw error;
    }
  }

  async finish(): Promise<StreamedBodyEnd> {
    try {
      while (!this.ended) {
        await this.pump();
        this.scanner.takeIds(); // none: item_ids has ended, or the body is refused anyway
      }
      const error = this.bodyError();
      if (error) {
        throw error;
      }
      const fields = this.scanner.fields.map(({ key, raw }) => {
        try {
          return { key, value: JSON.parse(raw) as unknown };
        } catch {
          throw invalidJsonError();
        }
      });
      return { fields, idsPosition: this.scanner.idsPosition, repeatedIds: this.scanner.repeatedIds };
    } finally {
      this.release();
    }
  }
}

const streamedBodies = new WeakMap<IncomingMessage, StreamedToolBody>();

/** The streamed body of this request, when its item_ids is read as it arrives. */
export function streamedBodyOf(req: IncomingMessage): StreamedToolBody | undefined {
  return streamedBodies.get(req);
}

async function startReading(req: Request, limit: BodyLimit): Promise<void> {
  const encoding = contentEncodingOf(req);
  const length = Number(req.headers['content-length']);
  if (encoding === 'identity' && length > limit.bytes) {
    throw bodyTooLargeError(limit);
  }
  const decompressor = DECOMPRESSORS[encoding]?.() ?? null;
  const source = decompressor ? req.pipe(decompressor) : req;
  const reading = new BodyReading(req, source, limit, encoding);
  while (!reading.ended && !(reading.scanner.streamingIds && reading.scanner.pendingIds > STREAM_AFTER_IDS)) {
    await reading.pump();
  }
  if (reading.ended) {
    req.body = reading.parseWhole();
    return;
  }
  reading.texts = null;
  reading.release = await slots.acquire();
  req.once('close', () => reading.release());
  streamedBodies.set(req, reading);
}

/**
 * The operation tool's body middleware: `parseSmall` (the JSON body parser) for small bodies,
 * the streaming reader for the others.
 */
export function operationToolBody(limit: BodyLimit, parseSmall: RequestHandler): RequestHandler {
  return (req, res, next) => {
    if (!readsHere(req)) {
      parseSmall(req, res, next);
      return;
    }
    startReading(req, limit).then(() => next(), next);
  };
}
