/**
 * Names a tenant gives (an operation type, a lease owner, a ref's id and kind, an organization)
 * reach response headers, span attributes, log lines and the operator pages. A control
 * character there forges a log line or a header, or hides text on a page, so names refuse them
 * at the edge (a 400 naming the field); free text (notes, reasons, item ids) is escaped where it
 * is shown instead.
 */
import type { z } from 'zod';

/** C0 controls, DEL, C1 controls, and the Unicode line and paragraph separators. */
const CONTROL_CHARACTER = /[\p{Cc}\u2028\u2029]/u;

export const CONTROL_CHARACTER_MESSAGE =
  'must not contain control characters (a line break, a tab, U+0000, …): it is a name that reaches logs, traces and pages';

/** Whether `value` holds a control character a name may not. */
export function hasControlCharacter(value: string): boolean {
  return CONTROL_CHARACTER.test(value);
}

/** `schema`, refusing a control character with a message that says why. */
export function nameLike<S extends z.ZodType<string>>(schema: S): S {
  return schema.refine((value) => !hasControlCharacter(value), CONTROL_CHARACTER_MESSAGE) as S;
}
