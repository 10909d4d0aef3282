/**
 * The checks of a create's `item_ids`, element by element, for ids that stream in and are never
 * held as one array: what the zod schema (`ItemIdInput`), the unstorable-value check of the
 * body and the deployment's id length limit would say of the whole array, with the same
 * messages and field paths (`item_ids[12]`), collected as the elements pass.
 *
 * A valid id costs a type and length test; only a failing one goes through the zod schema, so
 * the message is the schema's own.
 */
import { ItemIdInput, MAX_ITEM_ID_LENGTH } from './operation-input.ts';
import { type FieldIssue, findUnstorableValue, MAX_JSON_DEPTH, unstorableTextIssue } from './validation.ts';

/** At most this many element issues are kept (an error lists 20); the count says how many in all. */
const KEPT_ISSUES = 20;

export interface ItemIdIssue {
  index: number;
  message: string;
}

/** `item_ids[3]` followed by a field path inside the element (`(body)` when there is none). */
function elementField(index: number, inner: string): string {
  const prefix = `item_ids[${index}]`;
  if (inner === '(body)') {
    return prefix;
  }
  return inner.startsWith('[') ? `${prefix}${inner}` : `${prefix}.${inner}`;
}

export class ItemIdTally {
  /** Elements seen. */
  count = 0;
  /** The schema's issues, the first {@link KEPT_ISSUES}. */
  readonly issues: ItemIdIssue[] = [];
  /** How many elements the schema refuses. */
  issueCount = 0;
  /** The first element the database could not store (U+0000, lone surrogate, nesting too deep). */
  firstUnstorable: FieldIssue | null = null;
  /** The first id longer than the deployment's limit (OPSPAD_MAX_ITEM_ID_LENGTH), if lower than the schema's. */
  firstLong: { index: number; length: number } | null = null;

  constructor(private readonly maxIdLength: number) {}

  /** Whether every element so far is a storable, valid id. */
  get clean(): boolean {
    return this.issueCount === 0 && this.firstUnstorable === null && this.firstLong === null;
  }

  /** Checks the next elements; returns them as ids when all of them are valid, else null. */
  check(elements: readonly unknown[]): string[] | null {
    let valid = true;
    for (const element of elements) {
      const index = this.count++;
      if (typeof element === 'string') {
        if (element.length === 0 || element.length > MAX_ITEM_ID_LENGTH) {
          this.addSchemaIssue(index, element);
          valid = false;
        } else if (element.length > this.maxIdLength && this.firstLong === null) {
          this.firstLong = { index, length: element.length };
          valid = false;
        }
        if (this.firstUnstorable === null) {
          const message = unstorableTextIssue(element);
          if (message) {
            this.firstUnstorable = { field: elementField(index, '(body)'), message };
            valid = false;
          }
        }
        continue;
      }
      valid = false;
      this.addSchemaIssue(index, element);
      if (this.firstUnstorable === null) {
        // The element sits at level 3 of the body (the body, item_ids, the element).
        const issue = findUnstorableValue(element, MAX_JSON_DEPTH, 3);
        if (issue) {
          this.firstUnstorable = { field: elementField(index, issue.field), message: issue.message };
        }
      }
    }
    return valid && this.clean ? (elements as string[]) : null;
  }

  private addSchemaIssue(index: number, element: unknown): void {
    this.issueCount++;
    if (this.issues.length < KEPT_ISSUES) {
      const result = ItemIdInput.safeParse(element);
      const message = result.success ? 'is not a valid id' : (result.error.issues[0]?.message ?? 'is not a valid id');
      this.issues.push({ index, message });
    }
  }
}
