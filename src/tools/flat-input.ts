/**
 * `manage_assistant_operation` is offered as one flat object (see definitions.ts), and callers in
 * strict function-calling mode (OpenAI `strict: true`) send every property of it — null for each
 * one they leave out, including fields only other actions have. Null means "not given" for every
 * opspad field, so those nulls are dropped before the action's strict schema sees them. A foreign
 * field with a value still fails as unknown, and the action's own fields are left untouched.
 */
import { OperationToolInput } from '../domain/operation-input.ts';

const FIELDS_BY_ACTION: ReadonlyMap<string, ReadonlySet<string>> = new Map(
  OperationToolInput.options.map((variant) => [variant.shape.action.value, new Set(Object.keys(variant.shape))]),
);

/** `input` without the null fields its action does not have (unchanged when there are none). */
export function dropForeignNulls(input: unknown): unknown {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) {
    return input;
  }
  const action = (input as { action?: unknown }).action;
  // Only a string names an action; anything else is left for the schema to refuse (String() on
  // an object with a non-callable toString would throw).
  const fields = typeof action === 'string' ? FIELDS_BY_ACTION.get(action) : undefined;
  if (!fields) {
    return input;
  }
  const entries = Object.entries(input);
  const kept = entries.filter(([name, value]) => value !== null || fields.has(name));
  return kept.length === entries.length ? input : Object.fromEntries(kept);
}
