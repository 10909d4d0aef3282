/**
 * Turns zod failures into {@link AppError}s whose message names each bad field, so a caller (or
 * a model) can fix its input without guessing.
 */
import type { z } from 'zod';
import { AppError } from './errors.ts';

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

export function validationError(error: z.ZodError, what = 'input'): AppError {
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
  const more = error.issues.length - issues.length;
  return new AppError('validation_failed', `Invalid ${what}: ${summary}${more > 0 ? ` (and ${more} more)` : ''}`, {
    issues,
    total_issues: error.issues.length,
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
