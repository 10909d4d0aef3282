/**
 * An incremental scanner for the operation tool's body that hands out the elements of the
 * top-level `item_ids` array as they arrive, instead of parsing the body in one piece.
 *
 * A create of 1,000,000 ids is a 16 MB body; `JSON.parse` and zod over it held the event loop
 * for 1–2 s on this project's machine, and every other request waited. This scanner is fed the
 * decoded text chunk by chunk (each chunk a few milliseconds of work) and keeps only:
 * - the elements of `item_ids` not yet taken ({@link ItemIdsScanner.takeIds}),
 * - the raw JSON text of every other top-level field, parsed with `JSON.parse` at the end (they
 *   are small in any create; each is parsed on its own).
 *
 * It checks the structure of the body (objects, arrays, strings, separators) as it goes; the
 * text of other values (numbers, literals, nested containers) is checked by `JSON.parse` when
 * they are parsed. The first problem stops the scan; {@link ItemIdsScanner.error} says what.
 * A body whose top level is not an object is not scanned further (nothing to stream): the
 * reader parses such a body whole, as it does every body that turns out small.
 */

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const COLON = 0x3a;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;

function isWhitespace(c: number): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}

/** Where the scanner is in the body. */
type State =
  | 'start' // before the top-level value
  | 'object-first' // after `{`: a key or `}`
  | 'object-key' // after `,`: a key
  | 'colon'
  | 'value' // a top-level field's value
  | 'object-next' // after a field: `,` or `}`
  | 'ids-first' // after `item_ids: [`: an element or `]`
  | 'ids-element' // after `,` in item_ids
  | 'ids-next' // after an element: `,` or `]`
  | 'done' // after the top-level value: whitespace only
  | 'whole'; // the top level is not an object: nothing to stream

/** What the scanner is in the middle of: a string, or another JSON value, spread over chunks. */
interface Token {
  kind: 'string' | 'value';
  pieces: string[];
  /** Inside a string: the previous character was a backslash. */
  escaped: boolean;
  /** Inside a string (for kind 'value': a string nested in the value). */
  inString: boolean;
  /** A string holding a backslash needs JSON.parse to decode it. */
  hasEscape: boolean;
  /** Open brackets and braces of a value. */
  depth: number;
}

/** A top-level field other than the streamed item_ids: its key and raw value text. */
export interface RawField {
  key: string;
  raw: string;
}

export class ItemIdsScanner {
  /** The first structural problem, or null. The scan stops at it. */
  error: string | null = null;
  /** Top-level fields other than the streamed `item_ids`, in body order. */
  readonly fields: RawField[] = [];
  /** The index in {@link fields} before which `item_ids` stood, or -1 when it was not streamed. */
  idsPosition = -1;
  /** A second `item_ids` key after the streamed one. */
  repeatedIds = false;
  /** Elements of item_ids read so far. */
  idsCount = 0;
  private state: State = 'start';
  private token: Token | null = null;
  private key = '';
  private ids: unknown[] = [];

  /** Whether the scan is inside the streamed item_ids array (more elements may come). */
  get readingIds(): boolean {
    return this.state === 'ids-first' || this.state === 'ids-element' || this.state === 'ids-next';
  }

  /** Whether the body's top level is an object whose `item_ids` is being streamed. */
  get streamingIds(): boolean {
    return this.idsPosition >= 0;
  }

  /** The elements read since the last call (strings, or the parsed value of other elements). */
  takeIds(): unknown[] {
    const taken = this.ids;
    this.ids = [];
    return taken;
  }

  /** How many elements wait to be taken. */
  get pendingIds(): number {
    return this.ids.length;
  }

  write(text: string): void {
    let i = 0;
    const n = text.length;
    while (i < n && this.error === null) {
      if (this.token) {
        i = this.continueToken(text, i);
        continue;
      }
      if (this.state === 'whole') {
        return;
      }
      const c = text.charCodeAt(i);
      if (isWhitespace(c)) {
        i++;
        continue;
      }
      switch (this.state) {
        case 'start':
          if (c === OPEN_BRACE) {
            this.state = 'object-first';
            i++;
          } else {
            this.state = 'whole';
          }
          break;
        case 'object-first':
        case 'object-key':
          if (c === CLOSE_BRACE && this.state === 'object-first') {
            this.state = 'done';
            i++;
          } else if (c === QUOTE) {
            this.token = newToken('string');
            this.token.inString = true;
            i = this.continueToken(text, i + 1);
          } else {
            this.fail('expected a field name in double quotes');
          }
          break;
        case 'colon':
          if (c === COLON) {
            this.state = 'value';
            i++;
          } else {
            this.fail('expected ":" after a field name');
          }
          break;
        case 'value':
          if (this.key === 'item_ids' && c === OPEN_BRACKET && !this.streamingIds) {
            this.idsPosition = this.fields.length;
            this.state = 'ids-first';
            i++;
          } else {
            if (this.key === 'item_ids' && this.streamingIds) {
              this.repeatedIds = true;
            }
            this.token = newToken('value');
            i = this.continueToken(text, i);
          }
          break;
        case 'object-next':
          if (c === COMMA) {
            this.state = 'object-key';
            i++;
          } else if (c === CLOSE_BRACE) {
            this.state = 'done';
            i++;
          } else {
            this.fail('expected "," or "}" after a field');
          }
          break;
        case 'ids-first':
        case 'ids-element':
          if (c === CLOSE_BRACKET && this.state === 'ids-first') {
            this.state = 'object-next';
            i++;
          } else if (c === QUOTE) {
            i = this.scanIdString(text, i);
          } else {
            this.token = newToken('value');
            i = this.continueToken(text, i);
          }
          break;
        case 'ids-next':
          if (c === COMMA) {
            this.state = 'ids-element';
            i++;
          } else if (c === CLOSE_BRACKET) {
            this.state = 'object-next';
            i++;
          } else {
            this.fail('expected "," or "]" in item_ids');
          }
          break;
        case 'done':
          this.fail('unexpected text after the end of the body');
          break;
      }
    }
  }

  /** Call once the body has ended. */
  end(): void {
    if (this.error !== null) {
      return;
    }
    if (this.token?.kind === 'value' && !this.token.inString && this.token.depth === 0) {
      this.finishValue(this.token.pieces.join('')); // a number or literal ends with the body
      this.token = null;
    }
    if (this.token || (this.state !== 'done' && this.state !== 'whole' && this.state !== 'start')) {
      this.fail('the body ends before the JSON does');
    }
  }

  private fail(message: string): void {
    this.error = message;
  }

  /**
   * A string element of item_ids starting at `start` (its opening quote). The common case — the
   * whole string in this chunk — costs one pass over its characters and one slice.
   */
  private scanIdString(text: string, start: number): number {
    let hasEscape = false;
    for (let k = start + 1; k < text.length; k++) {
      const c = text.charCodeAt(k);
      if (c === QUOTE) {
        const raw = text.slice(start + 1, k);
        const decoded = hasEscape ? decodeString(raw) : raw;
        if (decoded === null) {
          this.fail('a string holds an invalid escape');
        } else {
          this.pushId(decoded);
        }
        return k + 1;
      }
      if (c === BACKSLASH) {
        hasEscape = true;
        k++;
      } else if (c < 0x20) {
        this.fail('a control character inside a string must be escaped');
        return k;
      }
    }
    // The chunk ends inside the string: carry on with the general token machinery.
    this.token = newToken('string');
    this.token.inString = true;
    return this.continueToken(text, start + 1);
  }

  private pushId(value: unknown): void {
    if (this.error !== null) {
      return;
    }
    this.ids.push(value);
    this.idsCount++;
    this.state = 'ids-next';
  }

  /** Continues the token in progress from `i`; returns where the scan goes on. */
  private continueToken(text: string, i: number): number {
    const token = this.token as Token;
    const start = i;
    const n = text.length;
    for (; i < n; i++) {
      const c = text.charCodeAt(i);
      if (token.inString) {
        if (token.escaped) {
          token.escaped = false;
        } else if (c === BACKSLASH) {
          token.escaped = true;
          token.hasEscape = true;
        } else if (c === QUOTE) {
          token.inString = false;
          if (token.kind === 'string') {
            token.pieces.push(text.slice(start, i));
            this.token = null;
            this.finishString(token);
            return i + 1;
          }
        } else if (c < 0x20) {
          this.fail('a control character inside a string must be escaped');
          return i;
        }
        continue;
      }
      // Inside a value, outside its strings.
      if (c === QUOTE) {
        token.inString = true;
      } else if (c === OPEN_BRACE || c === OPEN_BRACKET) {
        token.depth++;
      } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET || c === COMMA) {
        if (token.depth === 0) {
          return this.endValueAt(text, start, i); // the delimiter belongs to the enclosing container
        }
        if (c !== COMMA) {
          token.depth--;
          if (token.depth === 0) {
            return this.endValueAt(text, start, i + 1);
          }
        }
      } else if (isWhitespace(c) && token.depth === 0) {
        return this.endValueAt(text, start, i);
      }
    }
    token.pieces.push(text.slice(start));
    return n;
  }

  private endValueAt(text: string, start: number, end: number): number {
    const token = this.token as Token;
    token.pieces.push(text.slice(start, end));
    this.token = null;
    const raw = token.pieces.join('');
    if (raw.length === 0) {
      this.fail('expected a value');
      return end;
    }
    this.finishValue(raw);
    return end;
  }

  private finishString(token: Token): void {
    const raw = token.pieces.join('');
    const decoded = token.hasEscape ? decodeString(raw) : raw;
    if (decoded === null) {
      this.fail('a string holds an invalid escape');
      return;
    }
    if (this.state === 'ids-first' || this.state === 'ids-element') {
      this.pushId(decoded);
    } else {
      this.key = decoded;
      this.state = 'colon';
    }
  }

  private finishValue(raw: string): void {
    if (this.state === 'ids-first' || this.state === 'ids-element') {
      let value: unknown;
      try {
        value = JSON.parse(raw);
      } catch {
        this.fail('an element of item_ids is not valid JSON');
        return;
      }
      this.pushId(value);
      return;
    }
    this.fields.push({ key: this.key, raw });
    this.state = 'object-next';
  }
}

function newToken(kind: Token['kind']): Token {
  return { kind, pieces: [], escaped: false, inString: false, hasEscape: false, depth: 0 };
}

/** The value of a JSON string's contents (between the quotes) holding escapes; null if invalid. */
function decodeString(raw: string): string | null {
  try {
    return JSON.parse(`"${raw}"`) as string;
  } catch {
    return null;
  }
}
