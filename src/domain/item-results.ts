/**
 * An operation's results as one file (`GET /v1/operations/:id/results`, `opspad ops export`):
 * one line per item, in item order, as JSON Lines or CSV. Pure: the route streams what these
 * functions write, the client and the tests read it back with them.
 */
import { z } from 'zod';

export const RESULT_FORMATS = ['jsonl', 'csv'] as const;
export type ResultFormat = (typeof RESULT_FORMATS)[number];

/** The media type each format answers with. */
export const RESULT_MEDIA_TYPES: Record<ResultFormat, string> = {
  jsonl: 'application/x-ndjson',
  csv: 'text/csv',
};

export const ResultsQuery = z.object({
  format: z
    .enum(RESULT_FORMATS, { error: 'must be jsonl or csv' })
    .default('jsonl')
    .describe('`jsonl` (one JSON object a line, the default) or `csv` (a header line, then one row an item).'),
  status: z
    .enum(['failed'], { error: 'must be failed, or left out for every item' })
    .optional()
    .describe('`failed`: only the failed items (those `retry_failed` would copy).'),
});

/** One item's result: a line of the file. */
export interface ItemResult {
  item_id: string;
  /** `pending`, `leased` (a live lease holds it), `completed`, `failed` or `abandoned`. */
  status: 'pending' | 'leased' | 'completed' | 'failed' | 'abandoned';
  /** Why it failed (null unless failed). */
  reason: string | null;
  /** Leases of the item that have ended. */
  attempts: number;
  /** When its outcome was recorded (ISO 8601), null while it has none. */
  recorded_at: string | null;
}

/** The CSV columns, in order: also the header line. */
export const RESULT_COLUMNS = ['item_id', 'status', 'reason', 'attempts', 'recorded_at'] as const;

/**
 * Characters that make a spreadsheet read a cell as a formula (OWASP's CSV injection list), and
 * the apostrophe that escapes them: a cell starting with any of them gets one more apostrophe in
 * front, which a spreadsheet shows as text and {@link parseCsvCell} takes off again, so every
 * id round-trips exactly.
 */
const FORMULA_START = /^[=+\-@\t\r']/;

/** One CSV cell (RFC 4180): quoted when it holds a comma, a quote or a line break. */
export function csvCell(value: string | number | null): string {
  if (value === null) {
    return '';
  }
  let text = String(value);
  if (typeof value === 'string' && FORMULA_START.test(text)) {
    text = `'${text}`;
  }
  return /[",\r\n]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
}

/** What a cell written by {@link csvCell} held (the cell already unquoted). */
export function parseCsvCell(cell: string): string {
  return cell.startsWith("'") ? cell.slice(1) : cell;
}

/** The line (with its line break) of one item in `format`. */
export function resultLine(format: ResultFormat, item: ItemResult): string {
  if (format === 'jsonl') {
    return `${JSON.stringify(item)}\n`;
  }
  return `${RESULT_COLUMNS.map((column) => csvCell(item[column])).join(',')}\r\n`;
}

/** What the file starts with: the CSV header line, nothing for JSON Lines. */
export function resultsPreamble(format: ResultFormat): string {
  return format === 'csv' ? `${RESULT_COLUMNS.join(',')}\r\n` : '';
}
