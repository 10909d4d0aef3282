/**
 * Turns zod failures into {@link AppError}s whose message names each bad field, so a caller (or
 * a model) can fix its input without guessing.
 */
import type { z } from 'zod';
import { AppError } from './errors.ts';

/**
 * The largest value of a Postgres `integer` (ordinals, versions, trace numbers): a page bound or
 * cursor past it would make the query fail, so inputs are refused above it instead.
 */
export const MAX_INT4 = 2_147_483_647;

/** At most this many issues are listed: a million bad ids must not make a million-line error. */
const MAX_LISTED_ISSUES = 20;

export interface FieldIssue {
  field: string;
  message: string;
}

function fieldName(path: readonly PropertyKey[]): string {
  if (path.length === 0) {
    return '(body)';
  }
  return path
    .map((part, index) => (typeof part === 'number' ? `[${part}]` : `${index === 0 ? '' : '.'}${String(part)}`))
    .join('');
}

export function validationError(error: z.ZodError, what = 'input', totalIssues = error.issues.length): AppError {
  const issues: FieldIssue[] = error.issues.slice(0, MAX_LISTED_ISSUES).map((issue) => {
    const keys = issue.code === 'unrecognized_keys' ? issue.keys : [];
    return {
      field: fieldName(issue.path),
      message:
        keys.length > 0
          ? `unknown field${keys.length > 1 ? 's' : ''} ${keys.map((k) => `"${k}"`).join(', ')}: remove ${keys.length > 1 ? 'them' : 'it'}`
          : issue.message,
    };
  });
  const summary = issues.map((i) => `${i.field}: ${i.message}`).join('; ');
  const more = totalIssues - issues.length;
  return new AppError('validation_failed', `Invalid ${what}: ${summary}${more > 0 ? ` (and ${more} more)` : ''}`, {
    issues,
    total_issues: totalIssues,
  });
}

/** Parses `value` or throws a `validation_failed` {@link AppError}. */
export function parseOrThrow<S extends z.ZodType>(schema: S, value: unknown, what?: string): z.output<S> {
  const result = schema.safeParse(value);
  if (!result.success) {
    throw validationError(result.error, what);
  }
  return result.data;
}

/** Returns the values that occur more than once, each once, in order of first repeat. */
export function findDuplicates(values: readonly string[], limit = Number.POSITIVE_INFINITY): string[] {
  const seen = new Set<string>();
  const repeated = new Set<string>();
  for (const value of values) {
    if (seen.has(value)) {
      repeated.add(value);
      if (repeated.size >= limit) {
        break;
      }
    } else {
      seen.add(value);
    }
  }
  return [...repeated];
}

interface Frame {
  /** This container's key in its parent (unused for the root). */
  key: PropertyKey;
  node: Record<string, unknown> | readonly unknown[];
  /** The object's keys, or null for an array. */
  keys: readonly string[] | null;
  next: number;
}

function frameOf(key: PropertyKey, value: unknown): Frame | null {
  if (Array.isArray(value)) {
    return { key, node: value, keys: null, next: 0 };
  }
  if (value !== null && typeof value === 'object') {
    return { key, node: value as Record<string, unknown>, keys: Object.keys(value), next: 0 };
  }
  return null;
}

/** The path of the innermost container on `stack` (the root has none). */
function pathOf(stack: readonly Frame[]): PropertyKey[] {
  return stack.slice(1).map((frame) => frame.key);
}

const NUL_MESSAGE = 'must not contain the NUL character (\\u0000)';
const SURROGATE_MESSAGE =
  'must not contain a lone UTF-16 surrogate (\\ud800-\\udfff without its pair): send valid Unicode';
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** Why `text` cannot be stored (U+0000, a lone surrogate), or null. */
export function unstorableTextIssue(text: string): string | null {
  return unstorableIn(text);
}

/** The 400 for an unstorable value found in a body (see findUnstorableValue). */
export function unstorableValueError(issue: FieldIssue): AppError {
  return new AppError('validation_failed', `Invalid input: ${issue.field}: ${issue.message}`, {
    issues: [issue],
    total_issues: 1,
  });
}

/**
 * U+0000, and U+0000 or any surrogate: regular expressions, not `includes('\u0000')`, which in a
 * CPU profile of `opspad start` cost 0.26 s of a million-id create (this test 0.02 s), for
 * strings that nearly always pass.
 */
// biome-ignore lint/suspicious/noControlCharactersInRegex: U+0000 is what it looks for.
const NUL = /\u0000/;
// biome-ignore lint/suspicious/noControlCharactersInRegex: U+0000 is one of what it looks for.
const MAYBE_UNSTORABLE = /[\u0000\uD800-\uDFFF]/;

/** U+0000 only. */
function nulIn(text: string): string | null {
  return NUL.test(text) ? NUL_MESSAGE : null;
}

/**
 * U+0000, which Postgres text and jsonb cannot hold, and lone surrogates, which jsonb refuses
 * and text silently stores as U+FFFD.
 */
function unstorableIn(text: string): string | null {
  if (!MAYBE_UNSTORABLE.test(text)) {
    return null; // one cheap test; the exact ones only for a string that may fail them
  }
  return nulIn(text) ?? (LONE_SURROGATE.test(text) ? SURROGATE_MESSAGE : null);
}

/**
 * The first string (a value, or a key) in a parsed JSON value for which `check` has a message,
 * or the first container nested deeper than `maxDepth`; null when there is none. Iterative, so
 * no nesting depth can overflow the stack, and it allocates no path unless it finds one.
 */
function findIssue(
  value: unknown,
  check: (text: string) => string | null,
  maxDepth: number,
  /** The level `value` sits at in the body (the body itself is level 1). */
  level = 1,
): FieldIssue | null {
  if (typeof value === 'string') {
    const message = check(value);
    return message ? { field: fieldName([]), message } : null;
  }
  const root = frameOf('', value);
  const stack: Frame[] = root ? [root] : [];
  while (stack.length > 0) {
    const top = stack[stack.length - 1] as Frame;
    const size = top.keys ? top.keys.length : (top.node as readonly unknown[]).length;
    if (top.next >= size) {
      stack.pop();
      continue;
    }
    const index = top.next++;
    const key: PropertyKey = top.keys ? (top.keys[index] as string) : index;
    const keyMessage = typeof key === 'string' ? check(key) : null;
    if (keyMessage) {
      return { field: fieldName(pathOf(stack)), message: `field names ${keyMessage}` };
    }
    const child = (top.node as Record<PropertyKey, unknown>)[key];
    if (typeof child === 'string') {
      const message = check(child);
      if (message) {
        return { field: fieldName([...pathOf(stack), key]), message };
      }
    } else {
      const frame = frameOf(key, child);
      if (frame) {
        if (stack.length + level - 1 >= maxDepth) {
          return { field: fieldName([...pathOf(stack), key]), message: `must not nest deeper than ${maxDepth} levels` };
        }
        stack.push(frame);
      }
    }
  }
  return null;
}

/** The first string in a parsed JSON value (a value, or a key) that holds U+0000; null when none. */
export function findNulCharacter(value: unknown): FieldIssue | null {
  return findIssue(value, nulIn, Number.POSITIVE_INFINITY);
}

/** How deep request bodies may nest objects and arrays (the body itself is level 1). */
export const MAX_JSON_DEPTH = 100;

/**
 * The first thing in a parsed JSON body that cannot be stored, or null: a string (value or key)
 * holding U+0000 or a lone surrogate, or nesting deeper than `maxDepth` (serializing it for
 * Postgres would overflow the stack).
 */
export function findUnstorableValue(value: unknown, maxDepth = MAX_JSON_DEPTH, level = 1): FieldIssue | null {
  return findIssue(value, unstorableIn, maxDepth, level);
}
