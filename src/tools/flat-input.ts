/**
 * `manage_assistant_operation` is offered as one flat object (see definitions.ts), and callers in
 * strict function-calling mode (OpenAI `strict: true`) send every property of it: null, or the
 * default the description advertises, for each one they leave out, including fields only other
 * actions have. So before the action's strict schema sees a call:
 *
 * - a field of another action that is null or holds its published default is dropped;
 * - a field of another action with any other value is refused, naming the actions it belongs to
 *   (a value there means the model meant something this action cannot do);
 * - a free-form object sent as a string of JSON (how strict mode carries `query_params`) is
 *   decoded; a string that is not a JSON object is refused, naming the field.
 *
 * The action's own fields are left untouched: null there is "not given" in every schema.
 */
import { AppError } from '../domain/errors.ts';
import type { FieldIssue } from '../domain/validation.ts';
import { type JsonSchema, operationActionRules, toolDefinitions } from './definitions.ts';
import { isFreeFormObject } from './formats.ts';

const RULES = operationActionRules();
const FIELDS_BY_ACTION: ReadonlyMap<string, ReadonlySet<string>> = new Map(
  RULES.map((rule) => [rule.action, new Set(['action', ...rule.fields])]),
);
const ACTIONS_BY_FIELD: ReadonlyMap<string, readonly string[]> = (() => {
  const byField = new Map<string, string[]>();
  for (const rule of RULES) {
    for (const field of rule.fields) {
      byField.set(field, [...(byField.get(field) ?? []), rule.action]);
    }
  }
  return byField;
})();

const FLAT_PROPERTIES = (toolDefinitions()[0]?.input_schema.properties ?? {}) as Record<string, JsonSchema>;

/** The defaults the flat schema publishes (e.g. lease_seconds 300): what a strict model copies. */
const DEFAULTS: ReadonlyMap<string, unknown> = new Map(
  Object.entries(FLAT_PROPERTIES)
    .filter(([, property]) => property.default !== undefined)
    .map(([name, property]) => [name, property.default]),
);

/** Fields that are free-form objects: strict mode sends them as a string of JSON. */
const JSON_OBJECT_FIELDS: ReadonlySet<string> = new Set(
  Object.entries(FLAT_PROPERTIES)
    .filter(([, property]) => isFreeFormObject(property))
    .map(([name]) => name),
);

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function decodeJsonObject(field: string, text: string): Record<string, unknown> {
  let decoded: unknown;
  try {
    decoded = JSON.parse(text);
  } catch {
    decoded = undefined;
  }
  if (!isPlainObject(decoded)) {
    throw new AppError(
      'validation_failed',
      `Invalid input: ${field}: must be a JSON object, or a string holding one (e.g. '{"url":"https://example.com/hook"}'); got a string that is not.`,
      { issues: [{ field, message: 'must be a JSON object, or a string holding one' }], total_issues: 1 },
    );
  }
  return decoded;
}

/**
 * `input` as its action's schema should see it (unchanged when there is nothing to do); throws
 * a `validation_failed` {@link AppError} for a field of another action that holds a value.
 */
export function normalizeFlatInput(input: unknown): unknown {
  if (!isPlainObject(input)) {
    return input;
  }
  // Only a string names an action; anything else is left for the schema to refuse (String() on
  // an object with a non-callable toString would throw).
  const action = input.action;
  const fields = typeof action === 'string' ? FIELDS_BY_ACTION.get(action) : undefined;
  if (!fields) {
    return input;
  }
  const foreign: FieldIssue[] = [];
  const kept: [string, unknown][] = [];
  let changed = false;
  for (const [name, value] of Object.entries(input)) {
    if (fields.has(name)) {
      if (JSON_OBJECT_FIELDS.has(name) && typeof value === 'string') {
        kept.push([name, decodeJsonObject(name, value)]);
        changed = true;
      } else {
        kept.push([name, value]);
      }
      continue;
    }
    const owners = ACTIONS_BY_FIELD.get(name);
    if (owners && (value === null || (DEFAULTS.has(name) && DEFAULTS.get(name) === value))) {
      changed = true; // a strict model's filler for another action's field
      continue;
    }
    if (owners) {
      foreign.push({
        field: name,
        message: `is not a field of ${action} (it is for ${owners.join(', ')}): remove it, or send null`,
      });
      continue;
    }
    kept.push([name, value]); // not a field of any action: the strict schema names it
  }
  if (foreign.length > 0) {
    throw new AppError(
      'validation_failed',
      `Invalid manage_assistant_operation input: ${foreign.map((issue) => `${issue.field}: ${issue.message}`).join('; ')}`,
      { issues: foreign, total_issues: foreign.length },
    );
  }
  return changed ? Object.fromEntries(kept) : input;
}
