/**
 * How much one tenant's input may make opspad store, each limit set by a variable (docs/limits.md)
 * and checked on every path that writes: a small compressed request must not
 * become megabytes of state that every later read, list and version copies again.
 *
 * Sizes are UTF-8 bytes of the JSON opspad stores, so the limit is what the database holds,
 * whatever escapes or compression the request used. Measuring stops as soon as the limit is
 * passed: refusing 60 MB of query_params costs no more than accepting 16 KiB.
 */
import { AppError } from './errors.ts';

export interface SizeLimits {
  /** OPSPAD_MAX_QUERY_PARAMS_BYTES: an operation's `query_params`, as stored JSON. */
  queryParamsBytes: number;
  /** OPSPAD_MAX_NOTE_BYTES: one note (write_to_scratchpad, persistent_notes, an operation's notes). */
  noteBytes: number;
  /** OPSPAD_MAX_SCRATCHPAD_BYTES: a whole structured scratchpad, as stored JSON. */
  scratchpadBytes: number;
  /** OPSPAD_MAX_ITEM_ID_LENGTH: one item id, in characters. */
  itemIdLength: number;
}

export const DEFAULT_SIZE_LIMITS: SizeLimits = {
  queryParamsBytes: 16 * 1024,
  noteBytes: 64 * 1024,
  scratchpadBytes: 256 * 1024,
  itemIdLength: 512,
};

export const SIZE_LIMIT_VARIABLES = {
  queryParamsBytes: 'OPSPAD_MAX_QUERY_PARAMS_BYTES',
  noteBytes: 'OPSPAD_MAX_NOTE_BYTES',
  scratchpadBytes: 'OPSPAD_MAX_SCRATCHPAD_BYTES',
  itemIdLength: 'OPSPAD_MAX_ITEM_ID_LENGTH',
} as const satisfies Record<keyof SizeLimits, string>;

/** The limits the configuration sets (the OPSPAD_MAX_* variables). */
export function sizeLimitsOf(config: {
  OPSPAD_MAX_QUERY_PARAMS_BYTES: number;
  OPSPAD_MAX_NOTE_BYTES: number;
  OPSPAD_MAX_SCRATCHPAD_BYTES: number;
  OPSPAD_MAX_ITEM_ID_LENGTH: number;
}): SizeLimits {
  return {
    queryParamsBytes: config.OPSPAD_MAX_QUERY_PARAMS_BYTES,
    noteBytes: config.OPSPAD_MAX_NOTE_BYTES,
    scratchpadBytes: config.OPSPAD_MAX_SCRATCHPAD_BYTES,
    itemIdLength: config.OPSPAD_MAX_ITEM_ID_LENGTH,
  };
}

/** UTF-8 bytes of `text`. */
export function utf8Bytes(text: string): number {
  return Buffer.byteLength(text, 'utf8');
}

interface Frame {
  node: Record<string, unknown> | readonly unknown[];
  /** The object's keys; null for an array. */
  keys: readonly string[] | null;
  next: number;
}

/** Bytes of a JSON string literal, or just past `room` when it cannot fit in it. */
function stringBytes(text: string, room: number): number {
  // UTF-8 bytes are never fewer than UTF-16 units: a string longer than the room is over.
  return text.length > room ? text.length + 2 : utf8Bytes(JSON.stringify(text));
}

/**
 * UTF-8 bytes of `JSON.stringify(value)` for a parsed JSON value, exact up to `max`; once the
 * count passes `max` it stops and returns a number above `max`. Iterative (any nesting depth)
 * and bounded by `max`, not by the size of `value`.
 */
export function jsonBytesUpTo(value: unknown, max: number): number {
  let total = 0;
  const stack: Frame[] = [];
  let current: unknown = value;
  for (;;) {
    if (typeof current === 'string') {
      total += stringBytes(current, max - total);
    } else if (current === null || current === undefined) {
      total += 4;
    } else if (typeof current === 'number' || typeof current === 'boolean') {
      total += String(JSON.stringify(current)).length;
    } else if (Array.isArray(current)) {
      total += 2 + Math.max(0, current.length - 1);
      stack.push({ node: current, keys: null, next: 0 });
    } else if (typeof current === 'object') {
      const keys = Object.keys(current);
      total += 2 + Math.max(0, keys.length - 1);
      stack.push({ node: current as Record<string, unknown>, keys, next: 0 });
    }
    if (total > max) {
      return total;
    }
    let top = stack[stack.length - 1];
    while (top && top.next >= (top.keys ?? (top.node as readonly unknown[])).length) {
      stack.pop();
      top = stack[stack.length - 1];
    }
    if (!top) {
      return total;
    }
    if (top.keys) {
      const key = top.keys[top.next++] as string;
      total += stringBytes(key, max - total) + 1; // "key":
      if (total > max) {
        return total;
      }
      current = (top.node as Record<string, unknown>)[key];
    } else {
      current = (top.node as readonly unknown[])[top.next++];
    }
  }
}

const fmt = (n: number) => n.toLocaleString('en-US');

/**
 * The error for a value over its limit: a `validation_failed` naming the field, the size (when
 * it was measured to the end), the limit and its variable, and what to do instead.
 */
export function tooLarge(
  limit: keyof SizeLimits,
  field: string,
  size: { actual?: number; max: number },
  advice: string,
): AppError {
  const variable = SIZE_LIMIT_VARIABLES[limit];
  const unit = limit === 'itemIdLength' ? 'characters' : 'bytes';
  const measured = size.actual === undefined ? `more than ${fmt(size.max)}` : fmt(size.actual);
  const message = `is ${measured} ${unit}${limit === 'queryParamsBytes' || limit === 'scratchpadBytes' ? ' as stored JSON' : ''}; the limit is ${fmt(size.max)} ${unit} (${variable}). ${advice}`;
  return new AppError('validation_failed', `Invalid input: ${field}: ${message}`, {
    issues: [{ field, message }],
    total_issues: 1,
    limit: { variable, max: size.max, unit },
  });
}

/**
 * Throws {@link tooLarge} when `value`, stored as JSON, is over `max` bytes. For values as large
 * as a whole request body: measuring stops at the limit.
 */
export function checkJsonBytes(
  limit: 'queryParamsBytes' | 'scratchpadBytes',
  field: string,
  value: unknown,
  max: number,
  advice: string,
): void {
  if (jsonBytesUpTo(value, max) > max) {
    throw tooLarge(limit, field, { max }, advice);
  }
}

/** Throws {@link tooLarge} when `json` (what will be stored) is over `max` UTF-8 bytes. */
export function checkJsonTextBytes(
  limit: 'queryParamsBytes' | 'scratchpadBytes',
  field: string,
  json: string,
  max: number,
  advice: string,
): void {
  const actual = utf8Bytes(json);
  if (actual > max) {
    throw tooLarge(limit, field, { actual, max }, advice);
  }
}

/** Throws {@link tooLarge} when `text` is over `max` UTF-8 bytes. */
export function checkNoteBytes(field: string, text: string | null | undefined, max: number): void {
  if (text === null || text === undefined) {
    return;
  }
  const actual = utf8Bytes(text);
  if (actual > max) {
    throw tooLarge(
      'noteBytes',
      field,
      { actual, max },
      'Keep notes short; put long material somewhere the note can point to.',
    );
  }
}
