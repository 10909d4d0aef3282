/**
 * Request bodies: JSON, UTF-8, at most OPSPAD_MAX_BODY_BYTES once decompressed, and every way
 * that can fail answered as a 4xx that says what was wrong with the body.
 *
 * - `Content-Encoding: gzip | deflate | br` is decompressed as it streams in, and the limit
 *   counts the decompressed bytes (body-parser reads the limit off the inflated stream): a 64 KB
 *   gzip bomb stops at the limit, it is never inflated whole.
 * - The bytes must be UTF-8 (RFC 8259 §8.1). The decoder would silently turn every invalid
 *   sequence into U+FFFD, so two different bad ids would arrive as the same string and be
 *   refused as "duplicates" — or be stored as something the caller never sent. They are checked
 *   before decoding instead (`buffer.isUtf8`, simdutf: ~3 ms for 64 MB).
 */
import { isUtf8 } from 'node:buffer';
import type { IncomingMessage } from 'node:http';
import express, { type RequestHandler } from 'express';
import { AppError } from '../domain/errors.ts';

const SUPPORTED_ENCODINGS = 'gzip, deflate, br or none (identity)';

/** A body limit, and how the error that enforces it explains it. */
export interface BodyLimit {
  bytes: number;
  /** The variable that sets it. */
  variable: string;
  /** How the limit follows from the variable, when it is not the variable's value itself. */
  derivation?: string;
  /** What to do about it, in the error message. */
  advice: string;
}

/**
 * The limit of bodies other than the operation tool's: a create carries up to OPSPAD_MAX_ITEMS
 * ids, everything else at most a pad (and its JSON escapes) or a note. Parsing and validating a
 * body costs time on the event loop in proportion to its size, so no route reads more than
 * what it can accept.
 */
export function otherBodyLimit(maxBodyBytes: number, maxPadBytes: number): BodyLimit {
  const fromPad = Math.max(1024 * 1024, 2 * maxPadBytes);
  return {
    bytes: Math.min(maxBodyBytes, fromPad),
    variable: fromPad <= maxBodyBytes ? 'OPSPAD_MAX_SCRATCHPAD_BYTES' : 'OPSPAD_MAX_BODY_BYTES',
    derivation:
      fromPad <= maxBodyBytes
        ? `the larger of 1 MiB and twice OPSPAD_MAX_SCRATCHPAD_BYTES (${maxPadBytes})`
        : `OPSPAD_MAX_BODY_BYTES, smaller than the larger of 1 MiB and twice OPSPAD_MAX_SCRATCHPAD_BYTES (${maxPadBytes})`,
    advice:
      'Only manage_assistant_operation takes bodies up to OPSPAD_MAX_BODY_BYTES; other routes take the larger of 1 MiB and twice OPSPAD_MAX_SCRATCHPAD_BYTES. Send less per call.',
  };
}

/** A body with bytes that are no UTF-8 character. */
export function invalidUtf8Error(): AppError {
  return new AppError(
    'invalid_utf8',
    'The request body is not valid UTF-8: it holds bytes that are no UTF-8 character (e.g. Latin-1 text, a truncated or overlong sequence, an encoded surrogate). Encode the JSON as UTF-8; escape other characters as \\uXXXX.',
    { field: '(body)' },
  );
}

/** A body over `limit`, counted after decompression. */
export function bodyTooLargeError(limit: BodyLimit): AppError {
  return new AppError(
    'body_too_large',
    `The request body is larger than this route's limit of ${limit.bytes} bytes (${limit.derivation ?? limit.variable}), counted after decompression. ${limit.advice}`,
    { field: '(body)', limit_bytes: limit.bytes, variable: limit.variable },
  );
}

export function invalidJsonError(): AppError {
  return new AppError('invalid_json', 'The request body is not valid JSON.', { field: '(body)' });
}

/** A Content-Encoding opspad does not decode. */
export function unsupportedEncodingError(encoding: string): AppError {
  return new AppError(
    'invalid_body_encoding',
    `Invalid body: (body): Content-Encoding "${encoding}" is not supported; use ${SUPPORTED_ENCODINGS}.`,
    { field: '(body)', content_encoding: encoding },
  );
}

/** Bytes that are not what Content-Encoding says. */
export function corruptEncodingError(encoding: string): AppError {
  return new AppError(
    'invalid_body_encoding',
    `Invalid body: (body): it is not valid ${encoding} data (Content-Encoding: ${encoding}) — corrupt or cut short. Send the whole compressed body, or send it uncompressed without Content-Encoding.`,
    { field: '(body)', content_encoding: encoding },
  );
}

/** Which limit read each request's body, for the error that enforces it. */
const limitOfRequest = new WeakMap<IncomingMessage, BodyLimit>();

/** The JSON body parser: UTF-8 only, at most `limit.bytes` after decompression. */
export function jsonBody(limit: BodyLimit): RequestHandler {
  const parse = express.json({
    limit: limit.bytes,
    verify(_req, _res, body, encoding) {
      if (encoding !== 'utf-8') {
        throw new AppError(
          'invalid_utf8',
          `The request body must be UTF-8 encoded JSON, not ${String(encoding).toUpperCase()}: send "Content-Type: application/json" (or with "; charset=utf-8").`,
          { field: '(body)', charset: encoding },
        );
      }
      if (!isUtf8(body)) {
        throw invalidUtf8Error();
      }
    },
  });
  return (req, res, next) => {
    limitOfRequest.set(req, limit);
    parse(req, res, next);
  };
}

export function contentEncodingOf(req: IncomingMessage): string {
  return String(req.headers['content-encoding'] ?? 'identity')
    .trim()
    .toLowerCase();
}

/**
 * The {@link AppError} for an error body-parser (or raw-body, or zlib under them) raised while
 * reading a body; null when `error` is not one of theirs.
 */
export function bodyParseError(error: unknown, req: IncomingMessage): AppError | null {
  if (error instanceof AppError) {
    return error; // thrown by our own verify hook
  }
  const fields = (error ?? {}) as { type?: unknown; expose?: unknown; errno?: unknown; code?: unknown };
  const { type } = fields;
  const limit = limitOfRequest.get(req);
  if (type === 'entity.too.large' && limit) {
    return bodyTooLargeError(limit);
  }
  if (type === 'entity.parse.failed') {
    return invalidJsonError();
  }
  if (type === 'charset.unsupported') {
    return new AppError('invalid_utf8', 'The request body must be UTF-8 encoded JSON.', { field: '(body)' });
  }
  const encoding = contentEncodingOf(req);
  if (type === 'encoding.unsupported') {
    return unsupportedEncodingError(encoding);
  }
  // The decompressor under raw-body failed (zlib and brotli errors carry an errno and a code):
  // the bytes are not what Content-Encoding says.
  if (type === undefined && typeof fields.errno === 'number' && typeof fields.code === 'string') {
    return corruptEncodingError(encoding);
  }
  // Any other error of the body reader (an aborted upload, a length that does not match
  // Content-Length): raw-body types every error of its own, and marks 4xx messages safe to show.
  if (typeof type === 'string') {
    const message = fields.expose === true && error instanceof Error ? error.message : 'the body could not be read';
    return new AppError('validation_failed', `Invalid body: (body): ${message}.`, { field: '(body)' });
  }
  return null;
}
